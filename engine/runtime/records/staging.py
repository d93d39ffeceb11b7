"""Staging a records DAG's read groups: every sink's branch of their union, the error table's and a
replay's marks, each invisible to readers until the batch's commit sequence publishes it.

A sink that staged while the records were read (:mod:`~engine.runtime.records.single_pass`) is
taken from :attr:`Run.early <engine.runtime.records.results.Run.early>` instead of staged again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.commit.batch import BatchRef, Staged
from engine.commit.steps import DeltaWrite, user_metadata
from engine.converters.base import first_line
from engine.converters.frame import DATASET, FILE
from engine.forks.fork import BranchCounts, merged_origins
from engine.runtime.records.reading import union_groups
from engine.runtime.records.results import Group, Run, columns_of
from engine.sinks.base import Sink
from engine.sinks.error_table import RECORD_ID, ErrorTable, ReplayedTable, held_scope
from engine.sources.error_rows import ErrorRowsSource
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.runtime.records.parts import Parts

log = logging.getLogger(__name__)


def stage(
    parts: Parts, spark: SparkSession, run: Run, ok: list[Group], refused: dict[str, str]
) -> tuple[list[Staged], dict[str, int]]:
    """Stage every sink's branch (and the error table's) of the union of the ``ok`` groups, less
    the ``refused`` datasets' records, for the batch marked with their high marks; each sink's
    written count. Each staged sink's columns are noted in ``run.schemas``."""
    fs, batch = HadoopFs(spark), marked(parts, run.batch, ok, refused)
    frame = union_groups([(g.group, g.frame) for g in ok if g.frame is not None])
    if refused:
        frame = frame.where(~F.col(DATASET).isin(list(refused)))
    published = _published(ok, refused)
    by_branch: dict[str, int] = {}
    for counts in published:
        for branch, n in counts.by_branch.items():
            by_branch[branch] = by_branch.get(branch, 0) + n
    staged: list[Staged] = []
    try:
        written = _stage_sinks(parts, run, frame, batch, fs, by_branch, staged)
        if parts.spec.error_table and by_branch.get("error", 0):
            staged.append(_error_rows(parts, ok, published, frame, run, batch, fs))
        if parts.spec.replay_marks and by_branch.get("error", 0) < sum(c.read for c in published):
            staged.append(_replayed(parts, spark, run, ok, frame, batch, fs))
    except Exception:  # what was staged before, given up (the caller discards the sinks' staging)
        for done in staged:
            discard(None, batch, fs, done)
        raise
    return staged, written


def _stage_sinks(
    parts: Parts,
    run: Run,
    frame: DataFrame,
    batch: BatchRef,
    fs: HadoopFs,
    by_branch: dict[str, int],
    staged: list[Staged],
) -> dict[str, int]:
    """Stage each sink's branch of ``frame`` into ``staged`` (one staged early is kept if wanted,
    else thrown away); each sink's written count: what it kept, else its branch's records."""
    written: dict[str, int] = {}
    for sink in parts.sinks:
        branch = sink.conf.from_
        wanted = bool(by_branch.get(branch, 0) or sink.conf.stages_empty)
        done = run.early.pop(sink.name, None)
        if done is not None and not wanted:
            discard(sink, batch, fs, done)
            done = None
        elif done is None and wanted:
            log.info("dag %s: staging sink %s", parts.name, sink.name)
            rows = parts.fork.branch(frame, branch, run.plan.predicates[branch], parts.ctx)
            done = sink.stage(rows, batch, fs)
            run.schemas[sink.name] = columns_of(rows.schema)  # analysed once, by the write
        if done is not None:
            staged.append(done)
        written[sink.name] = by_branch.get(branch, 0) if done is None or done.rows is None else done.rows
    return written


def _error_rows(
    parts: Parts,
    ok: list[Group],
    published: list[BranchCounts],
    frame: DataFrame,
    run: Run,
    batch: BatchRef,
    fs: HadoopFs,
) -> Staged:
    """The rejected records staged into the error table, with the range of record ids it holds
    (the counting pass's: only a persisted frame is sure to reject the same records again)."""
    assert parts.spec.error_table is not None
    errors = parts.fork.error_table_rows(frame, run.plan.predicates["error"], parts.ctx)
    cached = all(g.cached is not None for g in ok)
    origins = merged_origins(c.origins for c in published if c.by_branch.get("error", 0)) if cached else None
    scope = held_scope(parts.ctx.job, parts.ctx.dag, origins)
    return ErrorTable(parts.spec.error_table).stage(errors, batch, fs, scope)


def _replayed(
    parts: Parts, spark: SparkSession, run: Run, ok: list[Group], frame: DataFrame, batch: BatchRef, fs: HadoopFs
) -> Staged:
    """A replay's marks: the record ids its groups read, less those the chain rejected again
    (whose ids the fork keeps in :data:`FILE`), staged in the replay's commit sequence."""
    assert parts.spec.replay_marks is not None and isinstance(parts.source, ErrorRowsSource)
    read = parts.source.record_ids(spark, [u for g in ok for u in g.group.units])
    again = frame.where(run.plan.predicates["error"]).select(F.col(FILE).alias(RECORD_ID))
    ids = read.join(again, on=RECORD_ID, how="left_anti")
    log.info("dag %s: staging the replayed records' marks", parts.name)
    return ReplayedTable(parts.spec.replay_marks).stage(ids, batch, fs, run_id=parts.run_id)


def marked(parts: Parts, batch: BatchRef, ok: list[Group], refused: dict[str, str] | None = None) -> BatchRef:
    """``batch`` carrying, in every sink's commit metadata, the high marks the ``ok`` groups
    reach (not those of ``refused`` datasets)."""
    marks = {
        u.dataset: high.to_json()
        for g in ok
        for u in g.group.units
        if u.dataset not in (refused or {}) and (high := parts.source.actual_high(u))
    }
    return replace(batch, user_metadata=user_metadata(parts.job, parts.name, batch.number, marks))


def discard_early(parts: Parts, run: Run, fs: HadoopFs) -> None:
    """What sinks staged while reading and staging did not take, thrown away."""
    while run.early:
        name, staged = run.early.popitem()
        discard(parts.sink(name), run.batch, fs, staged)


def discard(sink: Sink | None, batch: BatchRef, fs: HadoopFs, staged: Staged | None = None) -> None:
    """What ``sink`` staged of ``batch`` thrown away (its staging, and, given what it ``staged``,
    the files Delta's writer put in its table's directory, which no sequence will commit); if that
    fails, it stays where no reader of the table looks (the batch's staging, which the next run of
    the batch writes again, or files no Delta commit names)."""
    try:
        if sink is not None:
            sink.discard(batch, fs)
        for step in staged.steps if staged is not None else []:
            if isinstance(step, DeltaWrite):
                step.unstage(fs)
    except Exception as exc:
        log.warning(
            "sink %s: what it staged of batch %d stays in its staging: %s",
            sink.name if sink is not None else "?",
            batch.number,
            first_line(exc),
        )


def _published(ok: list[Group], refused: dict[str, str] | None) -> list[BranchCounts]:
    """The counts of the datasets of the ``ok`` groups that are not ``refused``."""
    return [c for g in ok for d, c in g.counts.items() if d not in (refused or {})]
