"""The flow compiler: a flow -> the hops that serve it, each an ordinary, validated job.

For each destination the compiler takes the cheapest path from the source over the flow graph
(Dijkstra; ties go to fewer hops, then to the path whose edge names sort first), so paths to
several destinations share their common hops, which run once. Each hop is one edge and one of its
templates, filled with its parameters and compiled exactly as a hand-written job is
(:func:`engine.spec.compile_job`). Compilation is pure (no Spark, no I/O but reading the config
files) and deterministic.

A hop's parameters, lowest precedence first, merged key by key:

1. the template's ``parameters.defaults``;
2. the hop's source node's ``properties`` under ``source`` and its destination node's under
   ``destination`` (with their ``name`` and ``kind``);
3. the edge's ``properties``;
4. the flow's ``properties``;
5. the built-ins: ``flow`` (``group``, ``name``, ``owner``), ``hop``, ``warehouse`` and, when the
   flow lists them, ``datasets``.

A compiler made with a :class:`~engine.flow.roots.Confinement` (the flow service's, and a run of a
flow the service stored) also refuses a hop that would read or write outside its roots, before
compiling it reads a file outside them (:mod:`engine.flow.roots`). Every plan is checked to name
no file longer than a file system holds (:mod:`engine.flow.limits`).
"""

from __future__ import annotations

import heapq
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from engine.errors import ConfigError
from engine.flow.limits import check_fits
from engine.flow.model import EdgeConf, FlowConf
from engine.flow.roots import Confinement, Root, Use, blamed, raw_at, schema_files, uses
from engine.flow.templates import Catalog, Template
from engine.flow.topology import LOCAL, Topology, hop_names
from engine.sources.conf import LimitsConf
from engine.spec import JobSpec, compile_job, renamed
from engine.spec.model import AnyDagSpec
from engine.spec.validation import validate
from engine.storage.paths import StoragePath, resolving_once

_UNITS = 1_000_000_000
"""Edge costs are compared in billionths: 0.1 + 0.7 ties with 0.8."""
FLOW_JOB_PREFIX = "flow"
"""A flow's job name is ``flow.<flowGroup>.<flowName>``: its lease, state and run history."""
_ANY_HOP = "@hop@"
"""The job name a hop's job is compiled under to be kept for other flows (see
:meth:`FlowCompiler._job`): no flow's hop has it (flow, group and edge names cannot hold ``@``),
and a job config whose text holds it (a ``name`` of its own, say) is compiled under the hop's
name and not kept."""
KEPT_HOPS = 4096
"""Compiled hop jobs a compiler keeps (the least recently used go first)."""


@dataclass(frozen=True)
class Hop:
    """One job of a flow: a template on an edge (or a listed template), on an executor."""

    name: str
    template: str
    template_file: str
    executor: str
    master: str
    after: tuple[str, ...]
    """The hops that must finish first."""
    params: dict[str, Any]
    """Read-only, as ``job``: a compiler shares them (and their maps) between the hops it keeps."""
    job: dict[str, Any]
    """The filled template: the hop's job config."""
    spec: JobSpec
    edge: str | None = None
    source: str | None = None
    destination: str | None = None
    submit: tuple[str, ...] = ()
    """The executor's ``spark-submit.sh`` options and overrides (a hop submitted on its own)."""
    overrides: tuple[str, ...] = ()

    def dag_names(self) -> dict[str, str]:
        """The hop job's DAG names -> their names in the flow's job, which key their state: the
        hop's name for a job of one DAG at its top, ``<hop>.<dag>`` for a DAG under ``dags`` or
        of a fan-out (``<hop>.<dataset>``), so adding a dataset renames no DAG."""
        return {d.name: self.name if d.name == self.spec.name else f"{self.name}.{d.name}" for d in self.spec.dags}


@dataclass(frozen=True)
class FlowPlan:
    group: str
    name: str
    file: str | None
    conf: FlowConf
    hops: tuple[Hop, ...]
    """In dependency order."""
    warehouse: str
    routes: dict[str, list[str]] = field(default_factory=dict)
    """Each destination -> the hops on its path, in order."""

    @property
    def job_name(self) -> str:
        return f"{FLOW_JOB_PREFIX}.{self.group}.{self.name}"

    def hop_lease(self, hop: str) -> str:
        """The lease of one hop: held by the flow for the hops it runs itself, by a submitted hop."""
        return f"{self.job_name}.{hop}"

    def hop(self, name: str) -> Hop:
        found = next((h for h in self.hops if h.name == name), None)
        if found is None:
            raise ConfigError(
                f"flow `{self.group}/{self.name}` has no hop `{name}` (hops: {', '.join(h.name for h in self.hops)})",
                key="hop",
            )
        return found

    def job_spec(self, names: list[str] | None = None) -> JobSpec:
        """The hops ``names`` (all by default) as one job: each hop's DAGs, renamed, run ``after``
        the DAGs of the hops before it that are among ``names`` (others are done already)."""
        chosen = [h for h in self.hops if names is None or h.name in names]
        by_name = {h.name: h for h in chosen}
        dags: list[AnyDagSpec] = []
        pools: dict[str, Any] = {}
        for hop in chosen:
            renamed = hop.dag_names()
            upstream = tuple(n for a in hop.after if a in by_name for n in by_name[a].dag_names().values())
            for dag in hop.spec.dags:
                after = tuple(renamed[a] for a in dag.after) + upstream
                dags.append(replace(dag, name=renamed[dag.name], after=after))
            pools.update(hop.spec.pools)
        seen: set[str] = set()
        for dag in dags:
            if dag.name in seen:
                raise ConfigError(
                    f"two DAGs of flow `{self.group}/{self.name}` are named `{dag.name}`: rename a template or an edge",
                    key="flow",
                    file=self.file,
                )
            seen.add(dag.name)
        return JobSpec(
            name=self.job_name,
            file=self.file,
            warehouse=self.warehouse,
            parallelism=self.conf.parallelism,
            dags=tuple(dags),
            description=self.conf.description or f"flow {self.group}/{self.name}",
            pools=pools,
        )

    def describe(self) -> dict[str, Any]:
        """What ``mode=plan`` prints: each hop's template, executor and final job config."""
        return {
            "flowGroup": self.group,
            "flowName": self.name,
            "job": self.job_name,
            "routes": self.routes,
            "hops": [
                {
                    "hop": h.name,
                    "edge": h.edge,
                    "from": h.source,
                    "to": h.destination,
                    "template": h.template,
                    "template_file": h.template_file,
                    "executor": h.executor,
                    "master": h.master,
                    "after": list(h.after),
                    "dags": list(h.dag_names().values()),
                    "job": h.job,
                }
                for h in self.hops
            ],
        }


class FlowCompiler:
    """Compiles flows over one topology and template catalog, keeping what it compiled for the
    flows after (see :meth:`_job`): it reads the file system (symbolic links, Avro schemas) once,
    so make a new one to see it change. One thread at a time."""

    def __init__(
        self,
        topology: Topology,
        catalog: Catalog,
        *,
        warehouse: str,
        prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        confinement: Confinement | None = None,
    ) -> None:
        self.topology = topology
        self.catalog = catalog
        self.warehouse = warehouse
        self._layers: dict[str, dict[str, Any]] = {}
        self._trees: dict[tuple[str, tuple[str, ...]], dict[str, tuple[float, int, tuple[str, ...]]]] = {}
        self._resolved: dict[str, str] = {}
        self._kept: OrderedDict[tuple[str, str, str, str], tuple[dict[str, Any], JobSpec]] = OrderedDict()
        self.prepare = prepare or (lambda job: job)
        """Applied to each filled template before it is compiled: the CLI fills in named
        connections and decrypts secrets there, as it does for a job file."""
        self.confinement = confinement
        """Set: each hop reads and writes only inside its roots (:mod:`engine.flow.roots`)."""

    def compile(
        self, raw: Mapping[str, Any], *, group: str, name: str, file: str | None, groups: tuple[str, ...] = ()
    ) -> FlowPlan:
        """``raw`` (the ``flow`` node, from ``jobs/flows/<group>/<name>``) -> its plan. ``groups``:
        the principal's groups, for the packs' ``group:<name>`` principals."""
        if self.confinement is not None:
            self.confinement.fresh()
        with resolving_once(self._resolved):
            plan = self._plan(raw, group=group, name=name, file=file, groups=groups)
        check_fits(plan)
        return plan

    def _plan(
        self, raw: Mapping[str, Any], *, group: str, name: str, file: str | None, groups: tuple[str, ...]
    ) -> FlowPlan:
        flow = validate(FlowConf, dict(raw), key="flow", file=file)
        for key, given, expected in (("flowGroup", flow.flow_group, group), ("flowName", flow.flow_name, name)):
            if given is not None and given != expected:
                raise ConfigError(
                    f"`{given}` differs from the file's place (`{expected}`, from jobs/flows/<flowGroup>/<flowName>)",
                    key=f"flow.{key}",
                    file=file,
                )
        ctx = _Flow(flow, group, name, file, groups)
        routes: dict[str, list[str]] = {}
        if flow.source is None:
            hops = self._listed(ctx)
        else:
            hops, routes = self._routed(ctx)
        return FlowPlan(group, name, file, flow, tuple(hops), self.warehouse, routes)

    # -- a flow that lists its templates --------------------------------------------------------

    def _listed(self, ctx: _Flow) -> list[Hop]:
        flow = ctx.flow
        if not flow.template_uris:
            raise ConfigError(
                "a flow names a `source` and `destinations` (routed over the topology) or lists `templateUris`",
                key="flow.source",
                file=ctx.file,
            )
        if flow.destinations:
            raise ConfigError("`destinations` need a `source`", key="flow.source", file=ctx.file)
        executor = flow.executor or LOCAL
        if executor not in self.topology.executors:
            known = ", ".join(sorted(self.topology.executors))
            raise ConfigError(f"unknown executor `{executor}` (known: {known})", key="flow.executor", file=ctx.file)
        hops: list[Hop] = []
        names = hop_names(flow.template_uris, key="flow.templateUris", file=ctx.file)
        for i, uri in enumerate(flow.template_uris):
            template = self.catalog.get(uri, key=f"flow.templateUris[{i}]", file=ctx.file)
            hop_name = names[i]
            after = (hops[-1].name,) if hops else ()
            hops.append(self._hop(ctx, hop_name, template, f"flow.templateUris[{i}]", executor, after))
        return hops

    # -- a flow routed over the graph -----------------------------------------------------------

    def _routed(self, ctx: _Flow) -> tuple[list[Hop], dict[str, list[str]]]:
        flow, file = ctx.flow, ctx.file
        assert flow.source is not None
        if flow.executor is not None:
            raise ConfigError("a routed flow runs each hop on its edge's executor", key="flow.executor", file=file)
        if not flow.destinations:
            raise ConfigError("missing required key (the data nodes to move to)", key="flow.destinations", file=file)
        nodes = self.topology.nodes
        for key, node in (
            ("flow.source", flow.source),
            *((f"flow.destinations[{i}]", d) for i, d in enumerate(flow.destinations)),
        ):
            if node not in nodes:
                raise ConfigError(_unknown_node(node, nodes), key=key, file=file)
        for i, dest in enumerate(flow.destinations):
            if dest == flow.source:
                raise ConfigError("a destination is the source itself", key=f"flow.destinations[{i}]", file=file)
            if dest in flow.destinations[:i]:
                raise ConfigError(f"`{dest}` is listed twice", key=f"flow.destinations[{i}]", file=file)
        for i, uri in enumerate(flow.template_uris):
            self.catalog.get(uri, key=f"flow.templateUris[{i}]", file=file)
        best = self._cheapest(flow)
        edges: list[str] = []  # every edge on some path, in the order the paths take them
        routes: dict[str, list[str]] = {}
        for i, dest in enumerate(flow.destinations):
            if dest not in best:
                raise ConfigError(self._unreachable(flow, dest, best), key=f"flow.destinations[{i}]", file=file)
            path = best[dest][2]
            routes[dest] = list(path)
            edges += [e for e in path if e not in edges]
        hops: list[Hop] = []
        of_edge: dict[str, list[str]] = {}  # edge -> its hops
        for edge_name in sorted(edges, key=lambda e: (len(best[self.topology.edges[e].to][2]), e)):
            edge = self.topology.edges[edge_name]
            before = best[edge.from_][2]
            after = (of_edge[before[-1]][-1],) if before else ()
            edge_file = self.topology.file_of(f"edges.{edge_name}")
            for j, (uri, hop_name) in enumerate(zip(edge.templates, self.topology.hops_of(edge_name), strict=True)):
                template = self.catalog.get(uri, key=f"edges.{edge_name}.templates[{j}]", file=edge_file)
                hop = self._hop(
                    ctx,
                    hop_name,
                    template,
                    f"edges.{edge_name}.templates[{j}]",
                    edge.executors[0],
                    after,
                    edge_name,
                    edge,
                )
                hops.append(hop)
                of_edge.setdefault(edge_name, []).append(hop.name)
                after = (hop.name,)
        return hops, {d: [h for e in path for h in of_edge[e]] for d, path in routes.items()}

    def _usable(self, flow: FlowConf, edge: EdgeConf) -> bool:
        return not flow.template_uris or all(t in flow.template_uris for t in edge.templates)

    def _cheapest(self, flow: FlowConf) -> dict[str, tuple[float, int, tuple[str, ...]]]:
        """The nodes the source reaches -> (cost, hops, edge names) of their cheapest paths. Costs
        are summed in integer nano-units, so that equal sums of decimal costs tie. The tree from a
        source over the edges a flow may use is found once per compiler: flows from one source
        share it (a settled node's path does not depend on where the search stops)."""
        assert flow.source is not None
        key = (flow.source, tuple(sorted(flow.template_uris)))
        found = self._trees.get(key)
        if found is None:
            found = self._trees[key] = self._tree(flow)
        return found

    def _tree(self, flow: FlowConf) -> dict[str, tuple[float, int, tuple[str, ...]]]:
        assert flow.source is not None
        best: dict[str, tuple[float, int, tuple[str, ...]]] = {}
        queue: list[tuple[int, int, tuple[str, ...], str]] = [(0, 0, (), flow.source)]
        while queue:
            cost, count, path, node = heapq.heappop(queue)
            if node in best:
                continue
            best[node] = (cost / _UNITS, count, path)
            for name, edge in self.topology.outgoing(node):
                if edge.to not in best and self._usable(flow, edge):
                    heapq.heappush(queue, (cost + round(edge.cost * _UNITS), count + 1, (*path, name), edge.to))
        return best

    def _unreachable(self, flow: FlowConf, dest: str, best: dict[str, Any]) -> str:
        reached = sorted(best)
        into = sorted((n, e) for n, e in self.topology.edges.items() if e.to == dest)
        parts = [
            f"destination `{dest}` cannot be reached from `{flow.source}`: the graph reaches {', '.join(reached)}",
        ]
        if into:
            unusable = [n for n, e in into if e.from_ in best and not self._usable(flow, e)]
            if unusable:
                parts.append(f"the edges {', '.join(unusable)} lead there but use templates not in `templateUris`")
            others = [f"{n} (from {e.from_})" for n, e in into if e.from_ not in best]
            if others:
                parts.append(f"edges into `{dest}` start where the source does not reach: {', '.join(others)}")
        else:
            parts.append(f"no edge leads into `{dest}`")
        parts.append(f"an edge from one of {', '.join(reached)} to `{dest}` is needed")
        return "; ".join(parts)

    # -- one hop --------------------------------------------------------------------------------

    def _hop(
        self,
        ctx: _Flow,
        name: str,
        template: Template,
        key: str,
        executor: str,
        after: tuple[str, ...],
        edge_name: str | None = None,
        edge: EdgeConf | None = None,
    ) -> Hop:
        pack = template.pack
        if not pack.allows(ctx.flow.owner, ctx.groups):
            raise ConfigError(
                f"template `{template.uri}`: {pack.refusal(ctx.flow.owner)}", key="flow.owner", file=ctx.file
            )
        params = self._params(ctx, name, template, edge)
        for required in template.parameters.required:
            if _lookup(params, required) is None:
                what = template.parameters.description.get(required)
                raise ConfigError(
                    f"hop `{name}`: template `{template.uri}` needs parameter `{required}`"
                    + (f" ({what})" if what else "")
                    + (
                        "; list them in the flow's `datasets`"
                        if required == "datasets"
                        else "; give it in the flow's `properties` (or the edge's, or the nodes')"
                    ),
                    key="flow.datasets" if required == "datasets" else f"flow.properties.{required}",
                    file=ctx.file,
                )
        roots = None if self.confinement is None else self.confinement.allowed(ctx.group, _ends(edge))
        job, spec = self._job(ctx, name, template, params, roots)
        if roots is not None:
            for use in uses(spec):
                self._confine(ctx, name, template, job, use, roots)
        runner = self.topology.executors[executor]
        return Hop(
            name=name,
            template=template.uri,
            template_file=str(template.file),
            executor=executor,
            master=runner.master,
            submit=tuple(runner.submit),
            overrides=tuple(runner.overrides),
            after=after,
            params=params,
            job=job,
            spec=spec,
            edge=edge_name,
            source=edge.from_ if edge else None,
            destination=edge.to if edge else None,
        )

    def _params(self, ctx: _Flow, hop: str, template: Template, edge: EdgeConf | None) -> dict[str, Any]:
        builtins: dict[str, Any] = {
            "flow": {"group": ctx.group, "name": ctx.name, "owner": ctx.flow.owner},
            "hop": hop,
            "warehouse": self.warehouse,
        }
        if ctx.flow.datasets:
            builtins["datasets"] = list(ctx.flow.datasets)
        return _merge(_merge(self._graph_params(template, edge), ctx.properties), builtins)

    def _graph_params(self, template: Template, edge: EdgeConf | None) -> dict[str, Any]:
        """The layers below the flow's: the template's defaults, the edge's nodes', the edge's;
        merged once per template and edge (never changed: merging copies what it changes)."""
        key = f"{template.uri}|{id(edge)}"
        found = self._layers.get(key)
        if found is not None:
            return found
        layers: list[Mapping[str, Any]] = [_nested(template.parameters.defaults)]
        if edge is not None:
            for role, node_name in (("source", edge.from_), ("destination", edge.to)):
                node = self.topology.nodes[node_name]
                layers.append({role: {**_nested(node.properties), "name": node_name, "kind": node.kind}})
            layers.append(_nested(edge.properties))
        merged: dict[str, Any] = {}
        for layer in layers:
            merged = _merge(merged, layer)
        self._layers[key] = merged
        return merged

    def _job(
        self, ctx: _Flow, hop: str, template: Template, params: dict[str, Any], roots: tuple[Root, ...] | None
    ) -> tuple[dict[str, Any], JobSpec]:
        """The hop's job config (the filled template) and its spec, compiled by
        :func:`compile_job`. What a compiler compiled is kept for the hops met again (the same
        edge in many flows) under what it was made from, with the flow file's folder (relative
        paths are read from it) and the template:

        - the parameters the template reads, when its compiled filler filled it (a hit is neither
          filled nor compiled again: the kept job config is handed out, shared);
        - else the job config after ``prepare``, as JSON (filled every time, compiled once).

        A kept spec is compiled under :data:`_ANY_HOP` and :func:`renamed` for each hop. With
        ``roots``, the schema files the job names are checked before it is compiled (which reads them)."""
        job_name = f"{FLOW_JOB_PREFIX}.{ctx.group}.{ctx.name}.{hop}"
        inputs = template.parsed.inputs(params)
        by_inputs = (template.uri, ctx.folder, "params", inputs) if inputs is not None else None
        kept = self._kept.get(by_inputs) if by_inputs is not None else None
        if kept is not None and by_inputs is not None:
            self._kept.move_to_end(by_inputs)
            return kept[0], renamed(kept[1], job_name, compiled_as=_ANY_HOP, file=ctx.file)
        job, filled_by_inputs = self._fill(hop, template, params, ctx.file)
        prepared = self.prepare(job)
        if roots is not None:  # before compiling, which reads them
            for use in schema_files(prepared, base=ctx.folder, datasets=ctx.flow.datasets):
                self._confine(ctx, hop, template, prepared, use, roots)
        try:
            text = json.dumps(prepared)  # keys in order: the order of a job's DAGs is theirs
        except (TypeError, ValueError):
            text = _ANY_HOP  # not plain data: compiled, never kept
        if _ANY_HOP in text:
            return job, self._compile(ctx, hop, template, prepared, job_name)
        if filled_by_inputs and by_inputs is not None:
            key, found = by_inputs, None
        else:
            key = (template.uri, ctx.folder, "job", text)
            found = self._kept.get(key)
        if found is None:
            try:
                spec = compile_job(prepared, name=_ANY_HOP, file=ctx.file, warehouse=self.warehouse)
            except ConfigError:  # compiled again under its name, for the error its user should see
                return job, self._compile(ctx, hop, template, prepared, job_name)
            self._check(ctx, hop, template, spec)
            found = (job, spec)  # a hit by the job's JSON hands out its own job: prepare may make two one
        self._keep(key, found)
        return job, renamed(found[1], job_name, compiled_as=_ANY_HOP, file=ctx.file)

    def _confine(
        self, ctx: _Flow, hop: str, template: Template, job: dict[str, Any], use: Use, roots: tuple[Root, ...]
    ) -> None:
        """Refuse ``use`` of hop ``hop`` outside ``roots``, naming the flow's property it was made
        of (else the hop job's key)."""
        assert self.confinement is not None
        why = self.confinement.refusal(use, roots)
        if why is None:
            return
        raw = raw_at(job, use.key)
        texts = [use.path, *(str(v) for v in (raw if isinstance(raw, list) else [raw]) if v is not None)]
        normal = StoragePath.parse(use.path).place[2]
        shown = use.path if normal == use.path or not StoragePath.parse(use.path).is_local else f"{use.path} ({normal})"
        raise ConfigError(
            f"hop `{hop}` (template `{template.uri}`) would {'write' if use.write else 'read'} {shown} (`{use.key}`), "
            f"{why}",
            key=blamed(ctx.properties, texts) or f"hops.{hop}.{use.key}",
            file=ctx.file,
        )

    def _keep(self, key: tuple[str, str, str, str], kept: tuple[dict[str, Any], JobSpec]) -> None:
        self._kept[key] = kept
        self._kept.move_to_end(key)
        if len(self._kept) > KEPT_HOPS:
            self._kept.popitem(last=False)

    @staticmethod
    def _fill(hop: str, template: Template, params: dict[str, Any], file: str | None) -> tuple[dict[str, Any], bool]:
        try:
            return template.filled(params)
        except ConfigError as exc:
            raise ConfigError(
                f"hop `{hop}`: template `{template.uri}` ({template.file}): {exc.message}",
                key=f"hops.{hop}" + (f".{exc.key}" if exc.key else ""),
                file=file,
            ) from None

    def _compile(self, ctx: _Flow, hop: str, template: Template, job: dict[str, Any], job_name: str) -> JobSpec:
        try:
            spec = compile_job(job, name=job_name, file=ctx.file, warehouse=self.warehouse)
        except ConfigError as exc:
            key = f"hops.{hop}.{exc.key}" if exc.key else f"hops.{hop}"
            raise ConfigError(
                f"hop `{hop}` (template `{template.uri}`, {template.file}): {exc.message}", key=key, file=ctx.file
            ) from None
        self._check(ctx, hop, template, spec)
        return spec

    def _check(self, ctx: _Flow, hop: str, template: Template, spec: JobSpec) -> None:
        """What a hop's job may not do that a job may."""
        if spec.discover is not None:
            raise ConfigError(
                f"hop `{hop}` (template `{template.uri}`): a flow's hop cannot discover its datasets when it runs "
                "(`fan_out.discover`) yet; list them in the flow's `datasets`",
                key=f"hops.{hop}.fan_out.discover",
                file=ctx.file,
            )
        if spec.limits != LimitsConf():
            raise ConfigError(
                f"hop `{hop}` (template `{template.uri}`): job-level `limits` apply to a whole flow's job; set "
                "them on the template's sources",
                key=f"hops.{hop}.limits",
                file=ctx.file,
            )


@dataclass(frozen=True)
class _Flow:
    flow: FlowConf
    group: str
    name: str
    file: str | None
    groups: tuple[str, ...]

    @cached_property
    def properties(self) -> dict[str, Any]:
        return _nested(self.flow.properties)

    @cached_property
    def folder(self) -> str:
        """Where the hops' relative paths are read from: the flow file's folder."""
        return os.path.dirname(self.file) if self.file else os.getcwd()


def _ends(edge: EdgeConf | None) -> tuple[str, ...]:
    """The data nodes an edge joins (none for a hop of listed templates)."""
    return (edge.from_, edge.to) if edge is not None else ()


def _unknown_node(node: str, nodes: Mapping[str, Any]) -> str:
    return f"unknown data node `{node}` (known: {', '.join(sorted(nodes)) or 'none'})"


def _nested(layer: Mapping[str, Any]) -> dict[str, Any]:
    """``{"source.path": x}`` -> ``{"source": {"path": x}}``: a parameter may be named with dots
    (as Gobblin's properties are, and YAML keeps them). Only the parameters' names: a map inside
    a value (Spark or JDBC options, ``fs.s3a.endpoint``) stays as it is."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        parts = str(key).split(".")
        at = out
        for part in parts[:-1]:
            inner = at.get(part)
            if not isinstance(inner, dict):
                inner = at[part] = {}
            at = inner
        last = parts[-1]
        at[last] = _merge(at[last], value) if isinstance(at.get(last), dict) and isinstance(value, Mapping) else value
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    if not over:
        return base
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, Mapping) else v
    return out


def _lookup(params: Mapping[str, Any], dotted: str) -> Any:
    at: Any = params
    for part in dotted.split("."):
        if not (type(at) is dict or isinstance(at, Mapping)) or part not in at:
            return None
        at = at[part]
    return at
