"""Where the hops of a confined flow may read and write: the warehouse, and the roots the
deployment's topology allows (``roots`` in ``conf/topology/``: :class:`~engine.flow.model.RootConf`).

A flow stored through the flow service comes from anyone a template pack allows and runs as the
service's OS user; its ``properties`` and ``datasets`` go into the templates' paths. Unconfined, such
a flow reads and writes anything that user can. A confined flow's hops may use:

- the warehouse, to read and write, but not its ``_engine/`` folder: nothing a hop reads lies in it
  or holds it (the engine's state and commit logs, the service's users, flows and executions'
  output), and nothing it writes lies in ``_engine/service`` (the engine's own writes there, a
  copy's events and a Kafka sink's staging, are the engine's: compiling refuses a path there);
- the topology's roots that apply to the hop: one naming a data node of the hop's edge, one
  naming the flow's group, one naming neither (every confined flow); read only unless ``write``.

What a hop reads and writes is asked of its compiled job: each DAG's ``inputs()`` and ``writes()``
(its source's and lookups' paths, its sinks' and error table), a copy's source, target and events,
and what the spec does not list (the Avro schema files it names, a Kafka sink's staging folder).
The Avro schema files a template names are checked before the job is compiled, since compiling
reads them: a flow learns nothing of a place it may not read, not even whether it exists. A glob
is checked by its fixed part and may not climb out of it (no ``..``, no ``/`` inside ``{...}``,
which Hadoop expands into paths of their own). A local place is compared by its real path too,
so a symbolic link inside a root that leads out is refused; a link made after the check (when the
flow is stored, and again each time an execution compiles it) is not seen.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engine.converters.conf import ConverterConf
from engine.flow.topology import Topology
from engine.sources.conf import SourceConf, fixed_prefix
from engine.spec.copy import CopyDagSpec
from engine.spec.model import DagSpec, JobSpec, PluginSpec
from engine.spec.places import METADATA_DIR, inside, nested
from engine.storage.paths import Place, StoragePath, is_relative, under

SERVICE_DIR = "service"
"""The flow service's store, ``<warehouse>/_engine/service`` (users, flows, executions)."""
AVRO_FILE = ".avsc"
OWN_METADATA = "the engine's metadata (state, commit logs, the service's users and flows)"
README = "Where flows read and write"
"""The README's paragraph on roots, which a refusal points to."""
_GLOB = re.compile(r"[*?\[{]")
_CLIMB = re.compile(r"(^|[/{,])\.\.($|[/},])")
_BRACE_SLASH = re.compile(r"\{[^}]*/")


def service_store(warehouse: str) -> str:
    """``<warehouse>/_engine/service``: where the flow service keeps its tables and the flows it runs."""
    return f"{warehouse.rstrip('/')}/{METADATA_DIR}/{SERVICE_DIR}"


def stored_by_service(file: str | None, warehouse: str) -> bool:
    """Whether a flow file is one the flow service wrote for an execution (under its store): such a
    flow came through the API and is confined when it runs, as it was when it was stored."""
    return file is not None and inside(_place(file), _place(service_store(warehouse)))


@dataclass(frozen=True)
class Use:
    """One place a hop's job reads or writes, at ``key`` of the job's config."""

    key: str
    path: str
    write: bool


@dataclass(frozen=True)
class Root:
    """A place a hop may use, and everything below it."""

    what: str
    """``the warehouse``, or ``root `landing```."""
    text: str
    place: Place
    write: bool

    def describe(self) -> str:
        return f"{self.text} ({self.what}{'' if self.write else ', read only'})"


class Confinement:
    """The roots of one topology and warehouse, and the check of a hop's places against them.
    Real paths are read again for each flow compiled (:meth:`fresh`), not kept for a service's life."""

    def __init__(self, topology: Topology, warehouse: str) -> None:
        self.topology = topology
        self.warehouse = warehouse
        self.metadata = _place(f"{warehouse.rstrip('/')}/{METADATA_DIR}")
        self.service = _place(service_store(warehouse))
        self.roots = {
            name: tuple(_root(f"root `{name}`", under(p, warehouse), conf.write) for p in conf.paths)
            for name, conf in sorted(topology.roots.items())
        }
        self.home = _root("the warehouse", warehouse, True)
        self._real: dict[str, str] = {}

    def fresh(self) -> None:
        """Forget the real paths read: a symbolic link made since is seen."""
        self._real = {}

    def allowed(self, group: str, nodes: tuple[str, ...]) -> tuple[Root, ...]:
        """The roots of a hop of a flow in ``group`` along an edge between ``nodes`` (none for a
        flow of listed templates)."""
        found = [self.home]
        for name, conf in sorted(self.topology.roots.items()):
            if (not conf.nodes and not conf.groups) or group in conf.groups or set(nodes) & set(conf.nodes):
                found += self.roots[name]
        return tuple(found)

    def refusal(self, use: Use, roots: tuple[Root, ...]) -> str | None:
        """Why ``use`` is refused (the end of a sentence naming it), or None. A local place is
        allowed by its real path; the path as written only words the refusal."""
        if _GLOB.search(use.path) and (_CLIMB.search(use.path) or _BRACE_SLASH.search(use.path)):
            return "a glob that climbs out of its fixed part (`..`, or `/` inside `{...}`): name the places themselves"
        given = _place(use.path)
        fixed = (given[0], given[1], fixed_prefix(given[2]) if _GLOB.search(given[2]) else given[2])
        real = self.real(fixed)
        engine = self.service if use.write else self.metadata
        if nested(fixed, engine) or nested(real, self.real(engine)):
            what, doing = ("the flow service's store", "writes") if use.write else (OWN_METADATA, "reads")
            return f"which lies in or holds {engine[2]}, {what}: no flow's hop {doing} there"
        usable = [r for r in roots if r.write or not use.write]
        if any(_within(real, self.real(r.place)) for r in usable):
            return None
        doing = "write" if use.write else "read"
        only = [r for r in roots if not r.write and (_within(real, self.real(r.place)) or _within(fixed, r.place))]
        if only:
            why = f"in {_listed(only)}, where this flow may only read; it may write in: {_listed(usable)}"
        elif any(_within(fixed, r.place) for r in usable):
            why = f"which leads through a symbolic link to {real[2]}, outside the places this flow may {doing}: "
            why += _listed(usable)
        else:
            why = f"outside the places this flow may {doing}: {_listed(usable)}"
        return f'{why}; the deployment allows more with the topology\'s `roots` (README "{README}")'

    def real(self, place: Place) -> Place:
        """A local place as its real path (symbolic links followed); another as it is."""
        if place[0] != "file":
            return place
        found = self._real.get(place[2])
        if found is None:
            found = self._real[place[2]] = os.path.realpath(place[2])
        return (place[0], place[1], found)


def uses(spec: JobSpec) -> Iterator[Use]:
    """Every place a job's DAGs read and write."""
    for dag in spec.dags:
        yield from _copy_uses(dag) if isinstance(dag, CopyDagSpec) else _records_uses(dag)


def _records_uses(dag: DagSpec) -> Iterator[Use]:
    source = dag.source
    assert isinstance(source.conf, SourceConf)  # a DAG's source spec holds its source's config
    for path in source.conf.inputs():
        yield Use(_key_of(source, path), path, False)
    for step in dag.steps:
        if isinstance(step.conf, ConverterConf):
            for path in step.conf.inputs():
                yield Use(_key_of(step, path), path, False)
    for plugin in (source, *dag.steps, *dag.sinks):  # what the spec does not list: schema files read
        schema = getattr(plugin.conf, "schema_", None)
        if isinstance(schema, str) and schema.endswith(AVRO_FILE):
            yield Use(f"{plugin.key}.schema", schema, False)
    for sink in dag.sinks:
        for name, path in sink.conf.writes().items():
            yield Use(f"{sink.key}.{name}", path, True)
        staging = getattr(sink.conf, "staging_dir", None)  # (a Kafka sink's batches, before they are sent)
        if isinstance(staging, str):
            yield Use(f"{sink.key}.staging_dir", staging, True)
    if dag.error_table:
        yield Use(f"{dag.key}.errors.path", dag.error_table, True)


def _copy_uses(dag: CopyDagSpec) -> Iterator[Use]:
    yield Use(f"{dag.key}.copy.source", dag.copy.source, False)
    yield Use(f"{dag.key}.copy.target", dag.copy.target, True)
    if dag.events_dir is not None:
        yield Use(f"{dag.key}.copy.events.path", dag.events_dir, True)


def schema_files(job: Mapping[str, Any], *, base: str, datasets: list[str]) -> Iterator[Use]:
    """The Avro schema files a filled template names (compiling reads them), ``{dataset}`` as each
    of ``datasets``: checked before the job is compiled."""
    for key, value in _leaves(job, "job"):
        if isinstance(value, str) and value.endswith(AVRO_FILE):
            for dataset in datasets or ["dataset"]:
                text = value.replace("{dataset}", dataset)
                yield Use(key, os.path.join(base, text) if is_relative(text) else text, False)


def blamed(properties: Mapping[str, Any], texts: list[str]) -> str | None:
    """The flow's property a refused path was made of: the longest value found in one of ``texts``
    (the path, and the template's text that made it), as ``flow.properties.<key>``."""
    found = [
        (len(v), k)
        for k, v in _leaves(properties, "")
        if isinstance(v, str) and len(v) > 1 and any(v in t for t in texts)
    ]
    return f"flow.properties.{max(found)[1]}" if found else None


def raw_at(job: Mapping[str, Any], key: str) -> Any:
    """The value at ``key`` (``job.sources.x.path``, ``job.dags.a.sinks.b.path``) of a job config."""
    at: Any = job
    for name, index in re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", key.removeprefix("job")):
        if name and isinstance(at, Mapping):
            at = at.get(name)
        elif index and isinstance(at, list) and int(index) < len(at):
            at = at[int(index)]
        else:
            return None
    return at


def _leaves(tree: Any, key: str) -> Iterator[tuple[str, Any]]:
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            yield from _leaves(v, f"{key}.{k}" if key else str(k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _leaves(v, f"{key}[{i}]")
    else:
        yield key, tree


def _key_of(plugin: PluginSpec, path: str) -> str:
    """The key of ``plugin``'s config that holds ``path`` (``....sources.landing.path``)."""
    for name, field in type(plugin.conf).model_fields.items():
        value, label = getattr(plugin.conf, name), field.alias or name
        if value == path:
            return f"{plugin.key}.{label}"
        if isinstance(value, list) and path in value:
            return f"{plugin.key}.{label}" + (f"[{value.index(path)}]" if len(value) > 1 else "")
    return plugin.key


def _root(what: str, text: str, write: bool) -> Root:
    return Root(what, text, _place(text), write)


def _place(text: str) -> Place:
    return StoragePath.parse(text).place


def _within(a: Place, b: Place) -> bool:
    return a == b or inside(a, b)


def _listed(roots: list[Root] | tuple[Root, ...]) -> str:
    return "; ".join(r.describe() for r in roots) or "none"
