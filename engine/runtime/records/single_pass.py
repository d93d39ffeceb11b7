"""Reading while staging: a run of one group of one dataset reads its records, counts them and
stages one sink in a single Spark job, the counts observed while that sink writes (the frame is
persisted on the way for the other sinks and the error table, if there are any). It is a strategy
the DAG may choose (:meth:`RecordsDag.run <engine.runtime.records.dag.RecordsDag.run>`); what it
staged waits in :attr:`Run.early <engine.runtime.records.results.Run.early>` for staging to take."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.converters.base import first_line
from engine.converters.frame import unpacked
from engine.runtime.metrics import executor_seconds, stages_retried
from engine.runtime.records.reading import group_frame, persisted, refused, share_costs, with_dataset
from engine.runtime.records.results import Group, Run, columns_of
from engine.runtime.records.staging import discard, marked
from engine.sinks.base import Sink
from engine.sinks.contract import SchemaContractError
from engine.sources.workunits import MultiWorkUnit
from engine.state.store import utcnow
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.runtime.records.parts import Parts

log = logging.getLogger(__name__)


def counting_sink(parts: Parts, groups: list[MultiWorkUnit]) -> Sink | None:
    """The sink whose staging also reads and counts the records of ``groups``, if one can: when
    they are one group of one dataset, of the sinks whose writes read their whole branch in one
    action, one staged even when its branch is empty, else one of the ``valid`` branch, else the
    first."""
    if len(groups) != 1 or len(groups[0].units) != 1 or not parts.fork.observable:
        return None
    able = [s for s in parts.sinks if s.counts_while_staging]
    ranked = sorted(able, key=lambda s: (not s.conf.stages_empty, s.conf.from_ != "valid"))
    return ranked[0] if ranked else None


def read_while_staging(parts: Parts, spark: SparkSession, run: Run, group: MultiWorkUnit, sink: Sink) -> Group | None:
    """``group`` read, counted and staged into ``sink`` in one Spark job. ``None``: the job failed
    (the caller then reads the usual way, counting first, which names the failure and isolates it)."""
    job_group = f"{parts.run_id}:{parts.name}:wu0"
    # Jobs an earlier run under the same run id left in this group (tests, one SparkContext):
    # the stage-retry check must be about this attempt's jobs only.
    earlier = set(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group))
    with run.scope.entered(spark.sparkContext, job_group, f"{parts.job}/{parts.name} {group.datasets[:3]}"):
        read = Group(group)
        batch, fs = marked(parts, run.batch, [read]), HadoopFs(spark)
        preds, branch = run.plan.predicates, sink.conf.from_
        try:
            frame = group_frame(parts, spark, run.plan, group)
            if not _sole_reader(parts, sink):
                frame, read.cached = persisted(parts, frame)
            # counted where the cache is read, before its engine columns are unpacked
            counted = frame if read.cached is None else read.cached
            observed, observation = parts.fork.observed(counted, f"{job_group}:counts")
            observed = unpacked(observed)  # as it is, if nothing was packed or the count unpacked
            rows = parts.fork.branch(with_dataset(observed, group), branch, preds[branch], parts.ctx)
            run.early[sink.name] = sink.stage(rows, batch, fs)
            run.schemas[sink.name] = columns_of(rows.schema)
        except Exception as exc:
            if read.cached is not None:
                read.cached.unpersist()
            discard(sink, batch, fs)
            if isinstance(exc, SchemaContractError):  # decided before any read: reading again cannot help
                raise
            log.warning(
                "dag %s: reading into sink %s failed (%s); reading again", parts.name, sink.name, first_line(exc)
            )
            return None
        log.info("dag %s: read, counted and staged sink %s in one pass", parts.name, sink.name)
        # A stage run twice may have counted twice: then (or without counts) count the cache.
        retried = stages_retried(spark, job_group, besides=earlier)
        counts = None if retried else parts.fork.observed_counts(observation)
        dataset = group.units[0].dataset
        if counts is None:
            log.info("dag %s: counting the persisted records: the write's counts may be off", parts.name)
        read.counts = {dataset: counts} if counts else parts.fork.count_by_dataset(frame, preds, only=dataset)
        read.refused = refused(parts, read.counts)
        read.frame = frame
        read.end = utcnow()
        share_costs(group, read, executor_seconds(spark, job_group))
    return read


def _sole_reader(parts: Parts, sink: Sink) -> bool:
    """Whether ``sink`` is all that reads the records (no other sink, no error table, no replay
    marks): then persisting them for the others would cost a pass that nothing reads."""
    others = parts.spec.error_table or parts.spec.replay_marks
    return len(parts.sinks) == 1 and parts.sinks[0] is sink and not others
