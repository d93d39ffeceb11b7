"""Compile a job's plain config (as composed by Hydra) into a frozen :class:`JobSpec`.

Everything that can be checked without Spark is checked here: unknown keys and plugin types, the
Avro schemas, step names, and that every sink reads from a branch that exists.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from dataclasses import replace
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.columns import READ_STEP
from engine.converters import CONVERTERS
from engine.errors import ConfigError, did_you_mean
from engine.plugins import Anchors, PluginConf, PluginEntry, Registry
from engine.sinks import SINKS
from engine.sources import SOURCES
from engine.spec import fanout
from engine.spec.copy import AttributesConf, CopyConf, CopyDagSpec, DatePartitionedFinderConf
from engine.spec.model import (
    BUILTIN_BRANCHES,
    CopyDagConf,
    DagConf,
    DagSpec,
    GlobDiscoverConf,
    JdbcTablesDiscoverConf,
    JobConf,
    JobSpec,
    PluginSpec,
    PublishConf,
    SourceSpec,
)
from engine.spec.places import check_one_writer, check_writable, inside, nested, place
from engine.spec.transforms import check_chain
from engine.spec.validation import validate
from engine.storage.paths import StoragePath, is_relative, under

_M = TypeVar("_M", bound=BaseModel)
_C = TypeVar("_C", bound=PluginConf)
_S = TypeVar("_S", bound=JobSpec | DagSpec | CopyDagSpec)


def compile_job(
    raw: dict[str, Any], *, name: str, file: str | None, warehouse: str, found: list[fanout.Found] | None = None
) -> JobSpec:
    """Validate ``raw`` (the ``job`` node) and return the job's frozen spec.

    A fan-out whose datasets are discovered at run time is compiled for one example dataset
    (``JobSpec.discover`` set) until ``found`` gives the real ones."""
    job = validate(JobConf, raw, key="job", file=file)
    job_name = job.name or name
    base_dir = Path(file).parent if file else Path.cwd()
    ctx = _Context(file=file, base_dir=base_dir, warehouse=warehouse, job_name=job_name)
    pending = _discovery(job, ctx) if found is None else None
    if job.dags or job.fan_out:
        if job.sources or job.sinks or job.converters or job.forks:
            raise ConfigError(
                "a job with `dags` or `fan_out` keeps sources, converters, forks and sinks inside each DAG",
                key="job.dags" if job.dags else "job.fan_out",
                file=file,
            )
        dags = tuple(_compile_dag(n, _inherit(job, d), f"job.dags.{n}", ctx) for n, d in job.dags.items())
        dags += _fan_out(job, ctx, found, taken={d.name for d in dags})
    else:
        if job.copy_ is None and (not job.sources or not job.sinks):
            missing = "sources" if not job.sources else "sinks"
            raise ConfigError("missing required key (or `copy` for a copy job)", key=f"job.{missing}", file=file)
        own = job.model_dump(include=set(DagConf.model_fields), by_alias=True, exclude_unset=True)
        dags = (_compile_dag(job_name, DagConf.model_validate(own), "job", ctx),)
    _check_dependencies(dags, file)
    _check_pools(job, dags, file)
    _check_copy_places(dags, warehouse, file)
    check_one_writer(dags, file)
    return JobSpec(
        name=job_name,
        file=file,
        warehouse=warehouse,
        parallelism=job.parallelism,
        dags=dags,
        description=job.description,
        limits=job.limits,
        pools=dict(job.pools),
        discover=pending,
    )


def renamed(spec: JobSpec, name: str, *, compiled_as: str, file: str | None) -> JobSpec:
    """What :func:`compile_job` gives for the config it compiled into ``spec`` under the name
    ``compiled_as``, when compiled under ``name`` from ``file`` (in the folder of ``spec``'s file:
    relative paths were resolved against it). What compiling derives from the name follows it: the
    job's and a single DAG's name, the default error table, copy manifests and events. A config
    that sets its own ``name`` keeps it. ``compiled_as`` must be a name no config holds."""
    if spec.name != compiled_as:
        return spec if spec.file == file else _with(spec, file=file)
    warehouse, dags = spec.warehouse, []
    before = _derived(warehouse, compiled_as)
    for dag in spec.dags:
        changes: dict[str, Any] = {"name": name} if dag.name == compiled_as else {}
        if isinstance(dag, CopyDagSpec):
            changes["manifests_dir"] = _manifests_dir(warehouse, name)  # always the job's
            if dag.events_dir is not None and dag.events_dir == before[2]:
                changes["events_dir"] = _events_dir_of(warehouse, name)
        elif dag.error_table is not None and dag.error_table == before[0]:
            changes["error_table"] = _error_table(warehouse, name)
        dags.append(_with(dag, **changes) if changes else dag)
    return _with(spec, name=name, file=file, dags=tuple(dags))


@functools.lru_cache(maxsize=16)
def _derived(warehouse: str, job_name: str) -> tuple[str, str, str]:
    """The places a job's name gives its DAGs: the error table, copy manifests and events."""
    return _error_table(warehouse, job_name), _manifests_dir(warehouse, job_name), _events_dir_of(warehouse, job_name)


def _with(spec: _S, **changes: Any) -> _S:
    """``dataclasses.replace`` for the frozen specs, without calling ``__init__`` again (it
    checks nothing there; a flow compiler renames a spec per hop)."""
    clone = object.__new__(type(spec))
    clone.__dict__.update(spec.__dict__, **changes)
    return clone


def _error_table(warehouse: str, job_name: str) -> str:
    """A records DAG's error table unless ``errors.path`` is set."""
    return under(f"_errors/{job_name}", warehouse)


def _manifests_dir(warehouse: str, job_name: str) -> str:
    return under(f"_engine/copy_manifests/{job_name}", warehouse)


def _events_dir_of(warehouse: str, job_name: str) -> str:
    """A copy DAG's events directory unless ``events.path`` is set."""
    return under(f"_engine/copy_events/{job_name}", warehouse)


def _fan_out(
    job: JobConf, ctx: _Context, found: list[fanout.Found] | None, taken: set[str]
) -> tuple[DagSpec | CopyDagSpec, ...]:
    conf = job.fan_out
    if conf is None:
        return ()
    if (conf.discover is None) == (not conf.datasets):
        raise ConfigError("give exactly one of `datasets` and `discover`", key="job.fan_out", file=ctx.file)
    if found is None:
        found = fanout.listed(conf) if conf.discover is None else [fanout.example(conf.discover)]
    chosen = fanout.select(conf, found, file=ctx.file)
    if not chosen and not conf.allow_empty:
        what = "the listed datasets" if conf.discover is None else f"discovery `{conf.discover.type}`"
        raise ConfigError(
            f"{what} gave no dataset (after include/exclude); set `allow_empty = true` if that is expected",
            key="job.fan_out",
            file=ctx.file,
        )
    dags = []
    for item in chosen:
        dag_name, raw = fanout.expand(conf, item, file=ctx.file)
        if dag_name in taken:
            raise ConfigError(
                f"dataset `{item.dataset}` gives DAG name `{dag_name}`, which is already taken",
                key="job.fan_out.name",
                file=ctx.file,
            )
        taken.add(dag_name)
        dag = validate(DagConf, raw, key="job.fan_out.template", file=ctx.file)
        spec = _compile_dag(dag_name, _inherit(job, dag), "job.fan_out.template", ctx)
        dags.append(replace(spec, dataset=item.dataset))
    return tuple(dags)


def _discovery(job: JobConf, ctx: _Context) -> GlobDiscoverConf | JdbcTablesDiscoverConf | None:
    """The fan-out's discovery still to run, its glob made absolute (relative to the job file)."""
    found = job.fan_out.discover if job.fan_out else None
    if isinstance(found, GlobDiscoverConf) and is_relative(found.path):
        return found.model_copy(update={"path": str(ctx.base_dir / found.path)})
    return found


def _check_dependencies(dags: tuple[DagSpec | CopyDagSpec, ...], file: str | None) -> None:
    names = {d.name for d in dags}
    for dag in dags:
        for upstream in dag.after:
            if upstream not in names:
                close = difflib.get_close_matches(upstream, names, n=1)
                hint = f"; did you mean `{close[0]}`?" if close else f"; DAGs: {', '.join(sorted(names))}"
                raise ConfigError(f"`{upstream}` is not a DAG of this job{hint}", key=f"{dag.key}.after", file=file)
    if not any(d.after for d in dags):
        return
    try:
        TopologicalSorter({d.name: d.after for d in dags}).prepare()
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        first = next(d for d in dags if d.name == exc.args[1][0])
        raise ConfigError(
            f"the DAGs depend on each other in a cycle: {cycle}", key=f"{first.key}.after", file=file
        ) from None


def _check_pools(job: JobConf, dags: tuple[DagSpec | CopyDagSpec, ...], file: str | None) -> None:
    named = [(n, f"job.pools.{n}") for n in job.pools] + [(d.pool, f"{d.key}.pool") for d in dags if d.pool]
    for name, key in named:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ConfigError(f"pool name `{name}`: use letters, digits, `_`, `.` and `-`", key=key, file=file)


def _inherit(job: JobConf, dag: DagConf) -> DagConf:
    """A DAG takes the job-level ``persist``, ``gates`` and ``max_rejected`` unless it sets its
    own, and the job-level ``publish`` and ``work_units`` key by key: ``publish.max_attempts`` set
    on the DAG keeps the job's policy."""
    update: dict[str, Any] = {}
    for k in ("persist", "gates", "max_rejected"):
        copy_dag = isinstance(dag, CopyDagConf) and k != "persist"  # a copy DAG has no records to judge
        if k in job.model_fields_set and k not in dag.model_fields_set and not copy_dag:
            update[k] = getattr(job, k)
    for k in ("publish", "work_units"):
        if k in job.model_fields_set:
            update[k] = _overlaid(getattr(job, k), getattr(dag, k) if k in dag.model_fields_set else None)
    return dag.model_copy(update=update)


def _overlaid(base: _M, over: BaseModel | None) -> _M:
    """``base`` with only the keys ``over`` sets: a key ``over`` holds by default never changes
    one of ``base``'s (the keys set stay marked set, for a later overlay)."""
    return base if over is None else base.model_copy(update=over.model_dump(exclude_unset=True))


class _Context:
    def __init__(self, *, file: str | None, base_dir: Path, warehouse: str, job_name: str) -> None:
        self.file = file
        self.base_dir = base_dir
        self.warehouse = warehouse
        self.job_name = job_name
        self.anchors = Anchors(base_dir=base_dir, warehouse=warehouse)

    def under_warehouse(self, path: str) -> str:
        return self.anchors.under_warehouse(path)


def _compile_dag(name: str, dag: DagConf, key: str, ctx: _Context) -> DagSpec | CopyDagSpec:
    if isinstance(dag, CopyDagConf):
        return _compile_copy(name, dag, key, ctx)
    if not dag.sources or not dag.sinks:
        missing = "sources" if not dag.sources else "sinks"
        raise ConfigError("missing required key (or give `copy` for a copy DAG)", key=f"{key}.{missing}", file=ctx.file)
    if len(dag.sources) != 1:
        raise ConfigError(
            f"a JobDag reads one source, this one names {len(dag.sources)}; use `dags` for more",
            key=f"{key}.sources",
            file=ctx.file,
        )
    source = _compile_source(dag, key, ctx)
    steps = _compile_steps(dag.converters, key, ctx)
    for branch in dag.forks:
        if branch in BUILTIN_BRANCHES:
            raise ConfigError(f"`{branch}` is a built-in branch", key=f"{key}.forks.{branch}", file=ctx.file)
        if branch.startswith("__"):  # the counting pass names its own aggregates so
            raise ConfigError("a branch name may not start with `__`", key=f"{key}.forks.{branch}", file=ctx.file)
    sinks = tuple(
        _compile_sink(sink_name, raw, f"{key}.sinks.{sink_name}", dag, ctx) for sink_name, raw in dag.sinks.items()
    )
    error_table = None
    if dag.errors.enabled:
        given = dag.errors.path
        error_table = ctx.under_warehouse(given) if given else _error_table(ctx.warehouse, ctx.job_name)
        where = f"{key}.errors.path" if dag.errors.path else f"{key}.errors"
        check_writable(error_table, warehouse=ctx.warehouse, key=where, file=ctx.file, what="the error table")
    return DagSpec(
        name=name,
        key=key,
        source=source,
        steps=steps,
        branches=dict(dag.forks),
        sinks=sinks,
        error_table=error_table,
        persist=dag.persist,
        publish=dag.publish,
        gates=tuple(dag.gates),
        max_rejected=dag.max_rejected,
        work_units=dag.work_units,
        priority=dag.priority,
        after=tuple(dag.after),
        pool=dag.pool,
        warehouse=ctx.warehouse,
    )


def _compile_copy(name: str, dag: CopyDagConf, key: str, ctx: _Context) -> CopyDagSpec:
    ckey = f"{key}.copy"
    conf = dag.copy_
    mixed = [k for k in ("sources", "sinks", "converters", "forks", "gates", "max_rejected") if getattr(dag, k)]
    if mixed:
        raise ConfigError(f"a copy DAG has no `{mixed[0]}`: copy jobs move files, not records", key=ckey, file=ctx.file)
    file_set = _file_set(conf, ckey, ctx)
    check_chain(conf.transforms, key=f"{ckey}.transforms", file=ctx.file)
    if conf.split.enabled and conf.transforms:
        raise ConfigError(
            "block splits need a plain copy (transformed bytes cannot be split)", key=f"{ckey}.split", file=ctx.file
        )
    target = _local_path(conf.target, ctx)
    _check_local_only(conf, target, ckey, ctx)
    resolved = conf.model_copy(update={"source": _local_path(conf.source, ctx), "target": target, "file_set": file_set})
    # A copy DAG publishes partially unless told otherwise (here, or at job level through _inherit).
    publish = _overlaid(PublishConf(policy="partial"), dag.publish if "publish" in dag.model_fields_set else None)
    return CopyDagSpec(
        name=name,
        key=key,
        copy=resolved,
        events_dir=_events_dir(conf, ckey, ctx),
        manifests_dir=_manifests_dir(ctx.warehouse, ctx.job_name),
        publish=publish,
        priority=dag.priority,
        after=tuple(dag.after),
        pool=dag.pool,
    )


def _file_set(conf: CopyConf, ckey: str, ctx: _Context) -> str:
    """What publishes together: a dated finder's partitions, else each dataset, unless set."""
    dated = isinstance(conf.datasets, DatePartitionedFinderConf)
    file_set = conf.file_set or ("partition" if dated else "dataset")
    if file_set == "partition" and not dated:
        raise ConfigError(
            "file sets by `partition` need `datasets.type = date_partitioned`", key=f"{ckey}.file_set", file=ctx.file
        )
    return file_set


def _check_local_only(conf: CopyConf, target: str, ckey: str, ctx: _Context) -> None:
    """Refuse, for a remote target, what only the OS of a local one can do."""
    if StoragePath.parse(target).is_local:
        return
    wants = [
        k
        for k, on in (
            ("split", conf.split.enabled),
            ("preserve.mtime", conf.preserve.mtime),
            ("preserve.permissions", conf.preserve.permissions),
            *((f"attributes.{a}", getattr(conf.attributes, a) is not None) for a in AttributesConf.model_fields),
        )
        if on
    ]
    if wants:
        raise ConfigError(
            f"`{wants[0]}` needs a local target (file attributes and block writes are set through the OS)",
            key=f"{ckey}.{wants[0]}",
            file=ctx.file,
        )


def _events_dir(conf: CopyConf, ckey: str, ctx: _Context) -> str | None:
    """Where the copy's events go, if enabled: the path given (checked writable) or the metadata."""
    if not conf.events.enabled:
        return None
    if not conf.events.path:  # the default lies in the metadata, where the engine places it itself
        return _events_dir_of(ctx.warehouse, ctx.job_name)
    events = _local_path(conf.events.path, ctx)
    check_writable(
        events, warehouse=ctx.warehouse, key=f"{ckey}.events.path", file=ctx.file, what="the events directory"
    )
    return events


def _check_copy_places(dags: tuple[DagSpec | CopyDagSpec, ...], warehouse: str, file: str | None) -> None:
    """Refuse copy targets that overlap what they must not: their own source (every run would copy
    its own output, or list and delete the source as target files), the engine's metadata, or the
    same target of another copy DAG (or a nested one where either DAG propagates deletions)."""
    copies = [d for d in dags if isinstance(d, CopyDagSpec)]
    for d in copies:
        key = f"{d.key}.copy.target"
        target = place(d.copy.target)
        if nested(target, place(d.copy.source)):
            raise ConfigError(
                f"the target {d.copy.target} and the source {d.copy.source} overlap (one is, or lies inside, the "
                "other): each run would copy its own output or treat the source as target files",
                key=key,
                file=file,
            )
        check_writable(d.copy.target, warehouse=warehouse, key=key, file=file, what="the target")
    for i, a in enumerate(copies):
        for b in copies[i + 1 :]:
            ta, tb = place(a.copy.target), place(b.copy.target)
            one_in_other = inside(tb, ta) or inside(ta, tb)
            deleting = next((d for d in (a, b) if d.copy.delete.enabled), None)
            if ta == tb or (one_in_other and deleting is not None):
                why = "the same target" if ta == tb else f"nested targets, and `{deleting.name}` propagates deletions"  # type: ignore[union-attr]
                raise ConfigError(
                    f"copy DAGs `{a.name}` and `{b.name}` have {why} ({a.copy.target}, {b.copy.target}): "
                    "each would see the other's files as its own",
                    key=f"{b.key}.copy.target",
                    file=file,
                )


def _local_path(path: str, ctx: _Context) -> str:
    """A plain path made absolute against the job file's directory, symbolic links followed (absolute
    ones too: the copy runtime keys staged files by this text); URLs (``file:/x`` too) as they are."""
    return str(StoragePath.parse(path, base=ctx.base_dir, resolve=True))


def _plugin(
    registry: Registry[_C, Any], raw: dict[str, Any], key: str, ctx: _Context
) -> tuple[PluginEntry[_C, Any], _C]:
    if not isinstance(raw, dict) or "type" not in raw:
        raise ConfigError("missing required key `type`", key=key, file=ctx.file)
    entry = registry.get(str(raw["type"]), key=f"{key}.type", file=ctx.file)
    return entry, validate(entry.conf, raw, key=key, file=ctx.file)


def _compile_source(dag: DagConf, key: str, ctx: _Context) -> SourceSpec:
    ((name, raw),) = dag.sources.items()
    skey = f"{key}.sources.{name}"
    entry, conf = _plugin(SOURCES, raw, skey, ctx)
    conf = conf.resolved(ctx.anchors)
    try:
        ddl = conf.schema_ddl()
    except ConfigError as exc:
        raise ConfigError(exc.message, key=f"{skey}.schema", file=exc.file or ctx.file) from exc
    return SourceSpec(name=name, conf=conf, entry=entry, key=skey, schema_ddl=ddl)


def _compile_steps(raws: list[dict[str, Any]], key: str, ctx: _Context) -> tuple[PluginSpec, ...]:
    compiled = []
    for i, raw in enumerate(raws):
        entry, conf = _plugin(CONVERTERS, raw, f"{key}.converters[{i}]", ctx)
        compiled.append((i, entry, conf.resolved(ctx.anchors)))
    type_counts = Counter(conf.type for _, _, conf in compiled)
    steps = []
    for i, entry, conf in compiled:
        step_name = conf.name or (conf.type if type_counts[conf.type] == 1 else f"{conf.type}_{i}")
        steps.append(PluginSpec(name=step_name, conf=conf, entry=entry, key=f"{key}.converters[{i}]"))
    dupes = [n for n, c in Counter(s.name for s in steps).items() if c > 1]
    if dupes:
        raise ConfigError(f"two converter steps are named `{dupes[0]}`", key=f"{key}.converters", file=ctx.file)
    read = next((s for s in steps if s.name == READ_STEP), None)
    if read is not None:  # its rejections and counts would mix with those of unreadable records
        raise ConfigError(
            f"a converter step may not be named `{READ_STEP}`: it names the rejections of unreadable records"
            " (set its `name`)",
            key=read.key,
            file=ctx.file,
        )
    return tuple(steps)


def _compile_sink(name: str, raw: dict[str, Any], key: str, dag: DagConf, ctx: _Context) -> PluginSpec:
    entry, conf = _plugin(SINKS, raw, key, ctx)
    branches = [*BUILTIN_BRANCHES, *dag.forks]
    if conf.from_ not in branches:
        hint = did_you_mean(conf.from_, branches)
        raise ConfigError(
            f"sink `{name}` reads from branch `{conf.from_}`, which no fork defines; "
            f"{hint}branches: {', '.join(branches)}",
            key=f"{key}.from",
            file=ctx.file,
        )
    conf = conf.resolved(ctx.anchors)
    for field, path in conf.writes().items():
        check_writable(path, warehouse=ctx.warehouse, key=f"{key}.{field}", file=ctx.file, what=f"the sink {field}")
    return PluginSpec(name=name, conf=conf, entry=entry, key=key)
