"""``mode=replay``: error-table rows run again through the job's current converters, forks and sinks.

After a fix to a converter (or to the source's schema), the records a DAG rejected can be read
again from its error table instead of from its source. A replay runs each chosen DAG as it is
configured now, with its source swapped for its error rows (:mod:`engine.sources.error_rows`):

- the rows are filtered by run id, first failing step and a text in the reasons (``replay.*``);
- those that pass now are published through the normal commit protocol, exactly once, and their
  ids are marked in ``_engine/replayed`` in the same commit sequence, so no later replay reads them;
- those rejected again are neither written again nor marked: their rows stay in the error table,
  for a later fix to replay;
- the DAG's live watermarks do not move: a replay keeps its bookkeeping in its own scope, ``replay``.

What a replay leaves out, and why: sinks reading ``from = error`` (they received those records
when they were rejected), DAG gates and the error budget (``gates``, ``max_rejected``: a replay is
the leftover of earlier batches, not a batch of the source), and ``after`` (each DAG replays on its
own). A sink with ``mode = overwrite`` would be left holding the replayed records alone: refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from engine.errors import ConfigError
from engine.plugins import PluginEntry
from engine.plugins.conf import option_texts
from engine.sinks.conf import SinkConf
from engine.sources.conf import ErrorRowsConf, FilesSourceConf, SourceConf
from engine.spec.model import DagSpec, PluginSpec, SourceSpec
from engine.state.status import Status

if TYPE_CHECKING:
    from engine.cli.modes import Run
    from engine.spec import JobSpec

ERROR_ROWS: PluginEntry[ErrorRowsConf, Any] = PluginEntry(ErrorRowsConf, "engine.sources.error_rows:ErrorRowsSource")
"""A replay's source; no job names it (it is not in the source registry)."""


def replay_spec(run: Run) -> JobSpec:
    """The job whose DAGs replay the error rows ``replay.*`` chooses; a config error when no DAG
    can replay (none chosen has an error table, an unknown DAG, a sink replay would overwrite)."""
    conf = run.conf.replay
    records = [d for d in run.spec.dags if isinstance(d, DagSpec)]
    if conf.dag is not None:
        chosen = [d for d in records if d.name == conf.dag]
        if not chosen:
            names = ", ".join(d.name for d in records) or "none"
            raise ConfigError(
                f"job {run.spec.name} has no records DAG `{conf.dag}` (its records DAGs: {names})", key="replay.dag"
            )
        if chosen[0].error_table is None:
            raise ConfigError(f"dag {conf.dag} has no error table: it keeps no rows to replay", key="replay.dag")
    else:
        chosen = [d for d in records if d.error_table]
        if not chosen:
            raise ConfigError(f"no DAG of job {run.spec.name} has an error table: nothing to replay", key="replay.dag")
    return replace(run.spec, dags=tuple(_replaying(run, d) for d in chosen))


def _replaying(run: Run, dag: DagSpec) -> DagSpec:
    """``dag`` reading its error rows: its converters and forks, its sinks but those of the error
    branch, no error table of its own, gates or error budget, nothing to wait for."""
    from engine.sources.error_rows import ErrorRowsSource

    sinks = tuple(s for s in dag.sinks if _sink(s).from_ != "error")
    for sink in sinks:
        said = _sink(sink).on_replay()
        if said.effect == "REPLACED":
            raise ConfigError(
                f"dag {dag.name}: sink `{sink.name}` ({said.what}) would be left holding the replayed records "
                "alone; replay into a sink that appends or merges (e.g. job.sinks."
                f"{sink.name}.mode=merge, or a DAG of its own)",
                key=f"{sink.key}.mode",
            )
    assert dag.error_table is not None
    source = dag.source
    schema = _read_schema(run, dag)
    own = source.conf
    conf = ErrorRowsConf(
        table=dag.error_table,
        marks=f"{run.warehouse}/_engine/replayed",
        job=run.spec.name,
        dag=dag.name,
        read_schema=schema,
        format=own.format if isinstance(own, FilesSourceConf) else "json",
        read_rows=isinstance(own, FilesSourceConf) and own.format in ("json", "csv"),
        options=option_texts(own.options) if isinstance(own, FilesSourceConf) else {},
        run=run.conf.replay.run,
        step=run.conf.replay.step,
        reason=run.conf.replay.reason,
    )
    replaying = SourceSpec(name=source.name, conf=conf, entry=ERROR_ROWS, key=source.key, schema_ddl=schema)
    unreadable = ErrorRowsSource(conf, name=source.name, key=source.key, schema_ddl=schema).unreadable(run.spark)
    if unreadable:
        raise ConfigError(
            f"dag {dag.name}: its error rows cannot be read back with its source's schema: {unreadable}",
            key=f"{source.key}.schema",
        )
    return replace(
        dag,
        source=replaying,
        sinks=sinks,
        error_table=None,
        gates=(),
        max_rejected=None,
        after=(),
        replay_marks=conf.marks,
        unwritten=tuple(s for s in dag.sinks if s not in sinks),
    )


def _sink(spec: PluginSpec) -> SinkConf:
    assert isinstance(spec.conf, SinkConf)  # a DAG's sink specs hold sink configs
    return spec.conf


def _read_schema(run: Run, dag: DagSpec) -> str:
    """The schema ``dag``'s source reads with now, as Spark DDL: the declared one, the one pinned
    for it, or the one its table has; a config error when it could only be inferred from input."""
    from engine.sources.base import PlanContext
    from engine.sources.files import FilesSource
    from engine.sources.workunits import Budget
    from engine.state.store import utcnow

    s = dag.source
    source = s.entry.load()(s.conf, name=s.name, key=s.key, schema_ddl=s.schema_ddl)
    assert isinstance(s.conf, SourceConf)
    if s.conf.infers_schema:
        pinned = run.metadata.pinned_schema(run.spec.name, dag.name)
        if pinned is None:
            why = "none was pinned yet"
        elif isinstance(source, FilesSource) and pinned.fingerprint != source.schema_fingerprint():
            why = "its format or reader options changed since it was pinned (the next run pins it again)"
        else:
            why = None
        if why:  # inferring it now would read every input file of the source
            raise ConfigError(
                f"dag {dag.name}: its source's schema is inferred and {why}, so its error rows cannot be "
                f"read back with it: declare {s.key}.schema, or run the job once first",
                key=f"{s.key}.schema",
            )
    ctx = PlanContext(
        state={},
        per_dataset=Budget(),
        per_run=Budget(),
        now=utcnow(),
        pinned_schema=lambda: run.metadata.pinned_schema(run.spec.name, dag.name),
    )
    schema = source.schema(run.spark, None, ctx)  # a table's own, or Parquet's: no records read
    if schema is None:
        why = f"dag {dag.name}: its source's schema is unknown: declare {s.key}.schema"
        raise ConfigError(why, key=f"{s.key}.schema")
    return str(schema.toDDL())


def dry_run(run: Run, spec: JobSpec) -> dict[str, Any]:
    """What a replay would read: each chosen DAG's rows left to replay, by first failing step."""
    from pyspark.sql import functions as F

    from engine.sources.error_rows import ErrorRowsSource
    from engine.storage.hadoop import HadoopFs

    dags = []
    for dag in spec.dags:
        assert isinstance(dag, DagSpec) and isinstance(dag.source.conf, ErrorRowsConf)
        source = ErrorRowsSource(dag.source.conf, name=dag.source.name, key=dag.source.key, schema_ddl=None)
        version = HadoopFs(run.spark).delta_version(dag.source.conf.table)
        steps: dict[str, int] = {}
        if version >= 0:
            counted = source.rows(run.spark, version).groupBy("step").agg(F.count(F.lit(1)).alias("n")).collect()
            steps = {str(r["step"]): int(r["n"]) for r in sorted(counted, key=lambda r: str(r["step"]))}
        table = dag.source.conf.table
        dags.append({"name": dag.name, "error_table": table, "rows": sum(steps.values()), "by_step": steps})
    summary = {"run_id": run.run_id, "job": spec.name, "status": Status.OK, "mode": "replay"}
    return {**summary, "dry_run": True, "replayable": dags}
