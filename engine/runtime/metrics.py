"""Cost accounting from Spark's own status store (no listener, no extra jobs)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def executor_seconds(spark: SparkSession, job_group: str) -> float:
    """Executor run time summed over every stage of every Spark job run under ``job_group``
    (0.0 if the status store cannot say: cost accounting never fails a run)."""
    sc = spark.sparkContext
    try:
        # The status store is fed by the listener bus, asynchronously: let it catch up (bounded).
        sc._jsc.sc().listenerBus().waitUntilEmpty(5000)  # type: ignore[union-attr]
    except Exception as exc:
        log.debug("listener bus not drained: %s", exc)
    try:
        store = sc._jsc.sc().statusStore()  # type: ignore[union-attr]
        job_ids = sc.statusTracker().getJobIdsForGroup(job_group)
    except Exception as exc:
        log.debug("no executor time for %s: %s", job_group, exc)
        return 0.0
    total_ms = 0
    for job_id in job_ids:
        try:  # the store evicts old jobs and stages (spark.ui.retainedJobs): skip those, keep the rest
            stages = store.job(job_id).stageIds()
            for i in range(stages.length()):
                total_ms += int(store.lastStageAttempt(stages.apply(i)).executorRunTime())
        except Exception as exc:
            log.debug("no executor time for job %s of %s: %s", job_id, job_group, exc)
    return total_ms / 1000.0


def stages_retried(spark: SparkSession, job_group: str, *, besides: frozenset[int] | set[int] = frozenset()) -> bool:
    """Whether a stage of a Spark job run under ``job_group`` ran more than once (a lost shuffle
    output makes Spark run a finished stage again); ``True`` when the status store cannot say
    (a job it no longer holds or has not seen end)."""
    sc = spark.sparkContext
    try:
        sc._jsc.sc().listenerBus().waitUntilEmpty(30_000)  # type: ignore[union-attr]
    except Exception as exc:  # a busy bus: the store may still show every job ended
        log.debug("listener bus not drained: %s", exc)
    try:
        store = sc._jsc.sc().statusStore()  # type: ignore[union-attr]
        for job_id in sc.statusTracker().getJobIdsForGroup(job_group):
            if job_id in besides:
                continue
            job = store.job(job_id)
            if str(job.status()) == "RUNNING":
                log.info("job group %s: job %s not seen ending yet", job_group, job_id)
                return True
            stages = job.stageIds()
            for i in range(stages.length()):
                if int(store.lastStageAttempt(stages.apply(i)).attemptId()) > 0:
                    return True
    except Exception as exc:
        log.info("job group %s: no stage attempts to check: %s", job_group, exc)
        return True
    return False
