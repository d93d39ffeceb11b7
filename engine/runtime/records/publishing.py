"""The publish policy over what a records DAG read: under ``full`` any failed group or refused
dataset rolls every other one back and nothing is staged; under ``partial`` the groups that read
fine are staged, once per sink, and their datasets commit. Staged data is invisible to readers:
the caller publishes it through a commit sequence (:mod:`engine.runtime.metadata`), which also
advances the committed datasets' watermarks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.commit.batch import Staged
from engine.commit.killpoints import kill_point
from engine.converters.base import first_line
from engine.runtime.dag import DatasetOutcome
from engine.runtime.records.results import Group, RecordsResult, Run, cancelled, columns_of, outcome, result_of
from engine.runtime.records.staging import discard, discard_early
from engine.sources.base import CORRUPT_RECORD
from engine.sources.workunits import WorkUnit
from engine.state.status import Status
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.runtime.records.parts import Parts

log = logging.getLogger(__name__)

Stage = Callable[["SparkSession", Run, list[Group], dict[str, str]], tuple[list[Staged], dict[str, int]]]
"""Stages the groups read fine, less the refused datasets: what it staged, and each sink's count."""


def publish(
    parts: Parts, spark: SparkSession, run: Run, read: list[Group], outcomes: list[DatasetOutcome], stage: Stage
) -> RecordsResult:
    """Apply the publish policy to what was ``read``: roll back, or ``stage`` the groups that
    read fine; the result says what each dataset comes to."""
    failed = [g for g in read if g.error]
    refused = {d: why for g in read for d, why in g.refused.items()}
    if refused or failed:  # what a sink staged while reading holds a refused dataset
        discard_early(parts, run, HadoopFs(spark))
    if (failed or refused) and parts.spec.publish.policy == "full":
        return _rolled_back(parts, read, outcomes, run.started)
    ok = [g for g in read if not g.error and any(u.dataset not in refused for u in g.group.units)]
    try:
        staged, written = _staged(parts, spark, run, ok, refused, stage)
    except Exception as exc:  # a sink failed: nothing commits (the rerun reads the same range)
        return _staging_failed(parts, run, read, outcomes, exc)
    outcomes += _outcomes(parts, read, refused)
    why = failed[0].error if failed else next(iter(refused.values()), "")
    result = result_of(parts, outcomes, written, run.started, message=why, read=read)
    used = parts.source.scratch if parts.source.scratch_used else None
    result.staged = [*staged, Staged([], used)] if staged and used else staged  # what it copied goes with the batch
    result.schemas = _schemas(run)
    return result


def _staged(
    parts: Parts, spark: SparkSession, run: Run, ok: list[Group], refused: dict[str, str], stage: Stage
) -> tuple[list[Staged], dict[str, int]]:
    """The ``ok`` groups staged; if a sink fails, what the sinks before it staged is thrown away."""
    if not ok:
        return [], {}
    try:
        staged = stage(spark, run, ok, refused)
    except Exception:
        fs = HadoopFs(spark)
        for sink in parts.sinks:
            discard(sink, run.batch, fs)
        raise
    kill_point("after_staging", parts.name)
    return staged


def _outcomes(parts: Parts, read: list[Group], refused: dict[str, str]) -> list[DatasetOutcome]:
    """Each dataset read: failed with its group's error or its refusal, else committed."""
    out = []
    for g in read:
        for u in g.group.units:
            if g.error or u.dataset in refused:
                out.append(outcome(u, g, Status.FAILED, g.error or refused[u.dataset]))
            else:
                out.append(outcome(u, g, Status.COMMITTED, _noted(parts, u, g)))
    return out


def _schemas(run: Run) -> dict[str, list[tuple[str, str]]]:
    """The columns the source was read with (key ``""``, without the corrupt-record column) and
    each sink staged."""
    schema = run.plan.schema
    read_with = [c for c in columns_of(schema) if c[0] != CORRUPT_RECORD] if schema is not None else []
    return {"": read_with, **run.schemas} if read_with else dict(run.schemas)


def _rolled_back(parts: Parts, read: list[Group], outcomes: list[DatasetOutcome], started: float) -> RecordsResult:
    """Under ``publish.policy=full`` a failed group, or a dataset refused by a quality gate,
    rolls every other one back."""
    failures = {
        u.dataset: g.error or g.refused[u.dataset]
        for g in read
        for u in g.group.units
        if g.error or u.dataset in g.refused
    }
    what = "dataset(s) failed or were refused" if any(g.refused for g in read) else "group(s) failed"
    count = len(failures) if any(g.refused for g in read) else len([g for g in read if g.error])
    why = f"rolled back: {count} {what} under publish.policy=full"
    for g in read:
        for u in g.group.units:
            if u.dataset in failures:
                outcomes.append(outcome(u, g, Status.FAILED, failures[u.dataset]))
            else:
                outcomes.append(outcome(u, g, Status.ROLLED_BACK, why))
    return result_of(parts, outcomes, {}, started, message=next(iter(failures.values())), read=read)


def _staging_failed(
    parts: Parts, run: Run, read: list[Group], outcomes: list[DatasetOutcome], exc: Exception
) -> RecordsResult:
    if run.stop.is_set():  # its Spark jobs were cancelled
        return cancelled(parts, run.plan.units, run.started, run.stop.reason)
    message = first_line(exc)
    log.error("dag %s: staging failed: %s", parts.name, message, exc_info=log.isEnabledFor(logging.DEBUG))
    for g in read:
        outcomes += [
            outcome(u, g, Status.FAILED, g.error or g.refused.get(u.dataset) or message) for u in g.group.units
        ]
    return result_of(parts, outcomes, {}, run.started, message=message, read=read)


def _noted(parts: Parts, unit: WorkUnit, g: Group) -> str:
    """A published dataset's status note: the unit's own, and what ``warn`` rules counted."""
    counts = g.counts.get(unit.dataset)
    warned = parts.fork.quality.warned(counts.flagged, counts.read) if counts else ""
    return "; ".join(n for n in (unit.note, warned) if n)
