"""Reading a records DAG's work units: each multi-work-unit read, converted, persisted and counted
per dataset as one Spark job (the unit of failure; a failed group of several units is retried one
unit at a time so one bad dataset does not hold others back)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F

from engine.converters.base import first_line
from engine.converters.frame import DATASET, packed, unpacked
from engine.forks.fork import BranchCounts
from engine.runtime import faults
from engine.runtime.metrics import executor_seconds
from engine.runtime.records.results import Group, RecordsPlan, Run
from engine.sources.workunits import MultiWorkUnit
from engine.state.store import utcnow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.runtime.records.parts import Parts

log = logging.getLogger(__name__)


def read_groups(parts: Parts, spark: SparkSession, run: Run, groups: list[MultiWorkUnit]) -> list[Group]:
    """Every group read, ``work_units.parallelism`` at a time; a failed group of several units
    read again one unit at a time."""
    workers = min(len(groups), parts.spec.work_units.parallelism)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{parts.name}-wu") as pool:
        done = list(pool.map(lambda ig: _read_group(parts, spark, run, ig[1], ig[0]), enumerate(groups)))
    out: list[Group] = []
    for g in done:
        if g.error and len(g.group.units) > 1:  # isolate the failing dataset(s)
            log.warning(
                "dag %s: a group of %d units failed (%s); retrying them one by one",
                parts.name,
                len(g.group.units),
                g.error,
            )
            out += [_read_group(parts, spark, run, MultiWorkUnit([u]), 1000 + i) for i, u in enumerate(g.group.units)]
        else:
            out.append(g)
    return out


def _read_group(parts: Parts, spark: SparkSession, run: Run, group: MultiWorkUnit, index: int) -> Group:
    job_group = f"{parts.run_id}:{parts.name}:wu{index}"
    with run.scope.entered(spark.sparkContext, job_group, f"{parts.job}/{parts.name} {group.datasets[:3]}"):
        return _read_scoped(parts, spark, run, group, job_group)


def _read_scoped(parts: Parts, spark: SparkSession, run: Run, group: MultiWorkUnit, job_group: str) -> Group:
    result = Group(group)
    if run.stop.is_set():
        result.error = f"not read: {run.stop.reason}"
        return result
    try:
        result.frame, result.cached = persisted(parts, group_frame(parts, spark, run.plan, group))
        result.counts = parts.fork.count_by_dataset(
            result.frame, run.plan.predicates, only=group.units[0].dataset, datasets=group.datasets
        )
        result.refused = refused(parts, result.counts)
    except Exception as exc:  # the group fails, the run goes on (the policy decides)
        if result.cached is not None:
            result.cached.unpersist()
        result.frame = result.cached = None
        if parts.source.skip_unreadable(exc, group.units):  # it dropped the file(s) it cannot read
            return _read_scoped(parts, spark, run, group, job_group)
        result.error = first_line(exc) + parts.source.read_hint(exc)
        log.error(
            "dag %s: reading %s failed: %s",
            parts.name,
            ", ".join(group.datasets),
            result.error,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
    result.end = utcnow()
    share_costs(group, result, executor_seconds(spark, job_group))
    return result


def group_frame(parts: Parts, spark: SparkSession, plan: RecordsPlan, group: MultiWorkUnit) -> DataFrame:
    """The group's records through the chain, lazily. A group of one dataset reads without its
    URN per record (nothing to carry and persist); it is :func:`with_dataset` that puts it back."""
    assert plan.schema is not None
    read = faults.inject(parts.source.read(spark, group.units, plan.schema), group.datasets)
    if len(group.units) == 1:
        read = read.drop(DATASET)
    return parts.chain(read)


def persisted(parts: Parts, frame: DataFrame) -> tuple[DataFrame, DataFrame | None]:
    """``frame`` read from the cache the spec's ``persist`` level keeps (:func:`packed`: a valid
    record's engine columns cost one null there), and that cache; without ``persist``, as is."""
    if parts.spec.persist == "NONE":
        return frame, None
    cached = packed(frame).persist(getattr(StorageLevel, parts.spec.persist))
    return unpacked(cached), cached


def refused(parts: Parts, counts: dict[str, BranchCounts]) -> dict[str, str]:
    """The datasets whose batch fails a quality gate (:class:`~engine.forks.quality.Quality`), and why."""
    out = {}
    for dataset, c in counts.items():
        rejected = c.by_branch.get("error", 0)
        why = parts.fork.quality.judge(read=c.read, rejected=rejected, flagged=c.flagged, gates=c.gates)
        if why:
            out[dataset] = "refused by quality gates: " + "; ".join(why)
            log.error("dag %s: %s: %s", parts.name, dataset, out[dataset])
    return out


def share_costs(group: MultiWorkUnit, read: Group, seconds: float) -> None:
    """Each unit's records and its share of the group's executor seconds (by records, else evenly)."""
    total = sum(c.read for c in read.counts.values()) or 0
    for unit in group.units:
        unit.records = read.counts[unit.dataset].read if unit.dataset in read.counts else 0
        share = unit.records / total if total else 1 / len(group.units)
        unit.executor_seconds = seconds * share


def with_dataset(frame: DataFrame, group: MultiWorkUnit) -> DataFrame:
    """``frame`` with each record's dataset URN: a one-dataset group's frame gets it as a constant
    (added over the persisted frame, so it costs nothing to keep)."""
    if DATASET in frame.columns:
        return frame
    return frame.withColumn(DATASET, F.lit(group.units[0].dataset))


def union_groups(frames: list[tuple[MultiWorkUnit, DataFrame]]) -> DataFrame:
    """One frame of several groups' records. Every group's frame must carry the dataset column for
    the union to line up, whether it holds one dataset or several."""
    return reduce(lambda a, b: a.unionByName(b), [with_dataset(f, g) for g, f in frames])
