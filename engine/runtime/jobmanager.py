"""The JobManager: plans every JobDag of a job, then runs them on threads in one SparkSession.

Planning first recovers each DAG's unpublished batches (the commit log), then plans all DAGs
(state loaded, work units computed or an open plan taken again, chains checked), so a config
mistake in any of them stops the job before any data is written. One DAG failing does not stop
the others; the result says which failed. Each DAG publishes on its own: its publish policy
decides which of its datasets advance, and its commit sequence makes that exactly-once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef
from engine.converters.base import first_line
from engine.runtime.jobdag import DagPlan, DagResult, JobDag
from engine.runtime.metadata import Blocked, MetadataManager
from engine.sinks.error_table import ErrorTable
from engine.spec import JobSpec
from engine.state import RunRecord, RunStatus, RunStore
from engine.state.store import FlowStatusRow, InMemoryMetadataStore, MetadataStore, utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    job: str
    run_id: str
    dags: list[DagResult]
    seconds: float
    flow: FlowStatusRow | None = None

    @property
    def status(self) -> str:
        if all(d.status == "SUCCEEDED" for d in self.dags):
            return "SUCCEEDED"
        return "PARTIAL" if self.flow is not None and self.flow.status.value == "PARTIAL" else "FAILED"

    def summary(self) -> dict[str, Any]:
        """The one-line JSON summary's content."""
        return {
            "run_id": self.run_id,
            "job": self.job,
            "status": self.status,
            "records_read": sum(d.records_read for d in self.dags),
            "errors": sum(d.records_rejected for d in self.dags),
            "sinks": {f"{d.name}.{sink}": n for d in self.dags for sink, n in d.sinks.items()},
            "failed_dags": [d.name for d in self.dags if d.status != "SUCCEEDED"],
            "execute_seconds": round(self.seconds, 3),
            "dags": [d.as_dict() for d in self.dags],
        }


@dataclass
class PlannedJob:
    """Every DAG of a job with its checked plan: nothing has been written yet."""

    spec: JobSpec
    run_id: str
    dags: list[tuple[JobDag, DagPlan, BatchRef, bool]]
    """Each DAG with its plan, its batch and whether the plan is an earlier run's, re-executed."""
    metadata: MetadataManager
    blocked: list[tuple[JobDag, Blocked]] = field(default_factory=list)
    """DAGs that plan nothing this run: a batch of theirs is not yet published."""
    start: datetime = field(default_factory=utcnow)


class JobManager:
    def __init__(
        self, spark: SparkSession, metadata: MetadataStore | None = None, *, guard: Callable[[], None] = lambda: None
    ) -> None:
        self.spark = spark
        self.metadata = metadata if metadata is not None else InMemoryMetadataStore()
        self.guard = guard
        """Raises if this run may no longer publish (it lost the job's lease); called before each
        commit sequence runs."""

    def validate(self, spec: JobSpec, run_id: str) -> None:
        """Check every DAG as :meth:`plan` does, without listing inputs or running any Spark job."""
        for dag in self._dags(spec, run_id):
            dag.plan(self.spark, validate_only=True)

    def plan(self, spec: JobSpec, run_id: str) -> PlannedJob:
        """Load state, plan work units and check every DAG; a config mistake raises before any write."""
        manager = MetadataManager(
            self.metadata,
            spark=self.spark,
            job=spec.name,
            run_id=run_id,
            job_budget=spec.limits.budget(),
            guard=self.guard,
        )
        planned = []
        blocked = []
        for dag in self._dags(spec, run_id):
            stuck = manager.recover(dag)
            if stuck is not None:
                log.error("dag %s: %s", dag.name, stuck.message)
                blocked.append((dag, stuck))
                continue
            number, reuse = manager.batch(dag)
            plan = dag.plan(self.spark, manager.context(dag), reuse=reuse)
            assert plan is not None
            manager.planned_units(plan.units)
            planned.append((dag, plan, BatchRef(spec.name, dag.name, number), reuse is not None))
        return PlannedJob(spec=spec, run_id=run_id, dags=planned, metadata=manager, blocked=blocked)

    def execute(self, job: PlannedJob, store: RunStore) -> JobResult:
        """Run the planned DAGs, ``parallelism`` at a time, recording each in ``store``."""
        started = time.monotonic()
        for path in sorted({d.spec.error_table for d, *_ in job.dags if d.spec.error_table}):
            ErrorTable(path).ensure(self.spark)  # before any concurrency
        with ThreadPoolExecutor(max_workers=job.spec.parallelism, thread_name_prefix="jobdag") as pool:
            futures = [pool.submit(self._run_one, job, *planned, store) for planned in job.dags]
            results = [f.result() for f in futures]
        for dag, stuck in job.blocked:
            job.metadata.blocked_status(dag, stuck)
            status = "QUARANTINED" if stuck.quarantined else "FAILED"
            results.append(DagResult(name=dag.name, status=status, message=stuck.message))
        for result in results:
            result.recovered = job.metadata.recovered.get(result.name, [])
        flow = job.metadata.finish(results, start=job.start)
        return JobResult(
            job=job.spec.name, run_id=job.run_id, dags=results, seconds=time.monotonic() - started, flow=flow
        )

    def run(self, spec: JobSpec, run_id: str, store: RunStore) -> JobResult:
        return self.execute(self.plan(spec, run_id), store)

    def _dags(self, spec: JobSpec, run_id: str) -> list[JobDag]:
        return [JobDag(d, job=spec.name, run_id=run_id) for d in spec.dags]

    def _run_one(
        self, job: PlannedJob, dag: JobDag, plan: DagPlan, batch: BatchRef, reused: bool, store: RunStore
    ) -> DagResult:
        spec, run_id = job.spec, job.run_id
        record = RunRecord(run_id=run_id, job=spec.name, dag=dag.name, status=RunStatus.RUNNING, start_time=utcnow())
        store.append(record)
        sc = self.spark.sparkContext
        sc.setJobGroup(f"{run_id}:{dag.name}", f"{spec.name}/{dag.name}", interruptOnCancel=True)
        started = time.monotonic()
        try:
            batch = replace(batch, epoch=job.metadata.store.log_epoch())
            job.metadata.begin(dag, plan.units, batch, reused=reused)
            result = job.metadata.commit(dag, dag.run(self.spark, plan, batch), batch)
        except Exception as exc:  # one DAG's failure must not stop the others
            log.error("dag %s failed: %s", dag.name, first_line(exc), exc_info=log.isEnabledFor(logging.DEBUG))
            result = DagResult(
                name=dag.name, status="FAILED", message=first_line(exc), seconds=time.monotonic() - started
            )
        status = RunStatus(result.status)
        store.append(
            record.finished(
                status,
                end_time=utcnow(),
                message=result.message,
                records_read=result.records_read,
                records_written=result.records_written,
                records_rejected=result.records_rejected,
            )
        )
        return result
