"""The metadata manager (Marmaray's): a run's in-memory copy of its datasets' state, saved only
for what commits, plus the run's JobStatus and FlowStatus rows."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

from engine.sources.base import PlanContext
from engine.sources.workunits import Budget, Size, WorkUnit
from engine.state.store import (
    DatasetState,
    DatasetStatus,
    FlowState,
    FlowStatusRow,
    JobStatusRow,
    MetadataStore,
    utcnow,
)

if TYPE_CHECKING:
    from engine.runtime.jobdag import DagResult, DatasetOutcome, JobDag


class MetadataManager:
    def __init__(
        self,
        store: MetadataStore,
        *,
        job: str,
        run_id: str,
        now: datetime | None = None,
        job_budget: Budget | None = None,
    ) -> None:
        self.store = store
        self.job = job
        self.run_id = run_id
        self.now = now or utcnow()
        self.job_budget = job_budget or Budget()
        self.planned = Size(0, 0, 0)
        """What the DAGs planned so far take of the job budget."""

    def context(self, dag: JobDag) -> PlanContext:
        """Load ``dag``'s state (its scope: live or its backfill's) into this run's copy."""
        state = dict(self.store.load_state(self.job, dag.name, dag.scope))  # the run's own copy
        limits = dag.source.conf.limits
        per_run = limits.budget().tighter(self.job_budget.minus(self.planned))
        first = self.planned == Size(0, 0, 0)
        return PlanContext(
            state=state, per_dataset=limits.per_dataset.budget(), per_run=per_run, now=self.now, guarantee=first
        )

    def planned_units(self, units: list[WorkUnit]) -> None:
        """Count ``units`` against the job budget (DAGs are planned one after the other)."""
        for unit in units:
            if not unit.empty:
                self.planned = self.planned + unit.size

    def commit(self, dag: JobDag, result: DagResult) -> list[DatasetState]:
        """Save the committed datasets' new watermarks (one append) and every dataset's status row."""
        now = utcnow()
        saved = []
        for o in result.datasets:
            if o.status != DatasetStatus.COMMITTED:
                continue  # failed, rolled back and empty units keep their stored watermark
            high = dag.source.actual_high(o.unit)
            if high is None or high == o.unit.low:
                continue
            saved.append(
                DatasetState(self.job, dag.name, dag.scope, o.unit.dataset, high, self.run_id, now, note="run")
            )
        rows = [self._status_row(dag, o, saved) for o in result.datasets]
        # Two appends to two tables, at once: each is a separate Delta commit either way.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="metadata") as pool:
            writes = [pool.submit(self.store.add_job_status, rows)]
            if saved:
                writes.append(pool.submit(self.store.save_state, saved))
            for write in writes:
                write.result()
        return saved

    def _status_row(self, dag: JobDag, o: DatasetOutcome, saved: list[DatasetState]) -> JobStatusRow:
        new = {s.dataset: s.watermark for s in saved}.get(o.unit.dataset, o.unit.low)
        return JobStatusRow(
            run_id=self.run_id,
            job=self.job,
            dag=dag.name,
            scope=dag.scope,
            dataset=o.unit.dataset,
            status=o.status,
            message=o.message[:2000],
            records=o.records,
            bytes=o.unit.size.bytes or 0,
            executor_seconds=round(o.unit.executor_seconds, 3),
            low=o.unit.low.display() if o.unit.low else None,
            high=new.display() if new else None,
            start_time=o.start_time,
            end_time=o.end_time,
        )

    def finish(self, results: list[DagResult], *, start: datetime, message: str = "") -> FlowStatusRow:
        datasets = [o for r in results for o in r.datasets]
        committed = sum(1 for o in datasets if o.status == DatasetStatus.COMMITTED)
        failed = sum(1 for o in datasets if o.status == DatasetStatus.FAILED)
        dag_failed = any(r.status != "SUCCEEDED" for r in results)
        if not dag_failed:
            status = FlowState.SUCCEEDED
        elif committed or any(r.status in ("SUCCEEDED", "PARTIAL") for r in results):
            status = FlowState.PARTIAL
        else:
            status = FlowState.FAILED
        row = FlowStatusRow(
            run_id=self.run_id,
            job=self.job,
            status=status,
            message=message or next((r.message for r in results if r.message), ""),
            datasets=len(datasets),
            committed=committed,
            failed=failed,
            records=sum(r.records_read for r in results),
            start_time=start,
            end_time=utcnow(),
        )
        self.store.add_flow_status(row)
        return row
