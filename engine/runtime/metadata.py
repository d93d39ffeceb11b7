"""The metadata manager (Marmaray's): a run's in-memory copy of its datasets' state, the publish
protocol around each DAG's batch, and the run's JobStatus and FlowStatus rows.

Per DAG, in order (see :mod:`engine.commit.log` for the log's rows):

1. :meth:`recover`: replay the DAG's unfinished commit sequences (each step verified, redone if
   not done). A DAG whose replay fails is skipped this run; after ``publish.max_attempts`` failed
   attempts its batch is quarantined until an operator releases or abandons it.
2. :meth:`batch`: the DAG's open plan (stored by an earlier run that never published it) is
   re-executed as it is, under its own batch number; otherwise a new batch number is drawn.
3. :meth:`begin`: a new plan is stored before any data is read.
4. :meth:`commit`: after the sinks staged their data, the commit sequence (publish every sink,
   delete staging, set the committed datasets' watermarks) is stored, then run, then marked done.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from engine.commit import codec
from engine.commit.batch import BatchRef
from engine.commit.fs import HadoopFs
from engine.commit.killpoints import kill_point
from engine.commit.log import ABANDONED, ATTEMPT, DONE, PLAN, Batch, DagLog
from engine.commit.sequence import CommitSequence
from engine.commit.steps import DeleteStaging, LogFiles, SetWatermarks, StepContext
from engine.converters.base import first_line
from engine.runtime.lost_state import lost_state
from engine.sources.base import PlanContext
from engine.sources.conf import SourceLimitsConf
from engine.sources.workunits import Budget, Size, WorkUnit
from engine.state import watermarks
from engine.state.errors import StateLostError
from engine.state.store import (
    DatasetState,
    DatasetStatus,
    FlowState,
    FlowStatusRow,
    JobStatusRow,
    LogRow,
    MetadataStore,
    PinnedSchema,
    utcnow,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.runtime.dag import AnyDag, DagResult, DatasetOutcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Blocked:
    """Why a DAG plans no new work this run: a batch of it is not yet published."""

    batch: Batch
    quarantined: bool
    message: str


class MetadataManager:
    def __init__(
        self,
        store: MetadataStore,
        *,
        spark: SparkSession,
        job: str,
        run_id: str,
        now: datetime | None = None,
        job_budget: Budget | None = None,
        guard: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.guard = guard
        self.spark = spark
        self.job = job
        self.run_id = run_id
        self.now = now
        """A fixed clock for planning; ``None``: each DAG plans at its own start (a DAG that runs
        ``after`` another sees the files its upstream wrote in the same run)."""
        self.job_budget = job_budget or Budget()
        self.planned = Size(0, 0, 0)
        """What the DAGs planned so far take of the job budget."""
        self._log = store.read_log(job)
        self._stale: list[LogRow] = []
        """``abandoned`` rows for open plans that no longer fit, written with the next plan."""
        self._states: dict[tuple[str, str], dict[str, DatasetState]] = {}
        self.recovered: dict[str, list[int]] = {}
        """Batches each DAG's recovery published this run."""

    # -- the commit log ------------------------------------------------------------------------

    def _append(self, *rows: LogRow) -> None:
        self.store.append_log(list(rows))
        self._log.extend(rows)

    def _row(self, dag: str, scope: str, batch: int, kind: str, *, body: str = "", message: str = "") -> LogRow:
        return LogRow(self.job, dag, scope, batch, kind, self.run_id, utcnow(), body, message[:4000])

    def dag_log(self, dag: str) -> DagLog:
        return DagLog(dag, self._log)

    def _context(self, *, fresh: bool) -> StepContext:
        return StepContext(self.spark, self.store, HadoopFs(self.spark), fresh=fresh)

    def check_state(self, dags: list[AnyDag]) -> None:
        """Refuse the run, before anything is written, if a DAG's state was lost (its table deleted
        or emptied while the commit log, the file log or the job status show committed batches).
        The state is read for planning anyway; only an empty one costs a look at the evidence."""
        for dag in dags:
            lost = lost_state(
                self.store, self._log, job=self.job, dag=dag.name, scope=dag.scope, state=self._state(dag)
            )
            if lost is not None:
                raise StateLostError(
                    job=self.job,
                    dag=dag.name,
                    scope=dag.scope,
                    table=self.store.location("state"),
                    evidence=lost.evidence,
                )

    def recover(self, dag: AnyDag) -> Blocked | None:
        """Replay ``dag``'s unfinished sequences, oldest first; ``None`` when none is left."""
        max_attempts = dag.spec.publish.max_attempts
        for batch in self.dag_log(dag.name).unfinished():
            failures = batch.failures()
            if len(failures) >= max_attempts:
                return Blocked(batch, True, _quarantined(batch, len(failures), failures[-1].message))
            log.info(
                "dag %s: recovering batch %d (attempt %d of %d)",
                dag.name,
                batch.number,
                len(failures) + 2,
                max_attempts,
            )
            try:
                self.guard()
                CommitSequence.of(self.job, batch).run(self._context(fresh=False))
            except Exception as exc:
                message = first_line(exc)
                self._append(self._row(dag.name, batch.scope, batch.number, ATTEMPT, message=message))
                if len(failures) + 1 >= max_attempts:
                    return Blocked(batch, True, _quarantined(batch, len(failures) + 1, message))
                return Blocked(
                    batch,
                    False,
                    f"publishing batch {batch.number} (left by an earlier run) failed again "
                    f"(attempt {len(failures) + 1} of {max_attempts}; the next run retries): {message}",
                )
            self._append(self._row(dag.name, batch.scope, batch.number, DONE, message="recovered"))
            self._states.pop((dag.name, batch.scope), None)  # read before the replay set its watermarks
            self.recovered.setdefault(dag.name, []).append(batch.number)
            log.info("dag %s: batch %d recovered and published", dag.name, batch.number)
        return None

    def batch(self, dag: AnyDag) -> tuple[int, list[WorkUnit] | None]:
        """This run's batch number for ``dag`` and, if an earlier run left its plan open (stored,
        never published), that plan's work units to re-execute."""
        dlog = self.dag_log(dag.name)
        found = dlog.open_plan(dag.scope)
        if found is None or found.plan is None:
            return dlog.next_batch(), None
        body = json.loads(found.plan.body)
        units: list[WorkUnit] = codec.decode(body["units"])
        state = self._state(dag)
        stale = body.get("fingerprint") != fingerprint(dag) or any(
            _json(u.low) != _json(state[u.dataset].watermark if u.dataset in state else None) for u in units
        )
        if stale:  # the source's config or a checkpoint changed since: nothing was published, plan anew
            log.info("dag %s: the open plan of batch %d no longer fits; planning anew", dag.name, found.number)
            self._stale.append(self._row(dag.name, dag.scope, found.number, ABANDONED, message="plan out of date"))
            return dlog.next_batch(), None
        log.info("dag %s: re-executing the stored plan of batch %d", dag.name, found.number)
        return found.number, units

    def begin(self, dag: AnyDag, units: list[WorkUnit], batch: BatchRef, *, reused: bool) -> None:
        """Store the batch plan before any data is read (a re-executed plan is already stored)."""
        rows = [r for r in self._stale if r.dag == dag.name]
        if not reused and any(not u.empty for u in units):
            body = {
                "datasets": sorted(u.dataset for u in units if not u.empty),
                "fingerprint": fingerprint(dag),
                "units": codec.encode(units),
            }
            rows.append(self._row(dag.name, dag.scope, batch.number, PLAN, body=json.dumps(body)))
        if rows:
            self._append(*rows)
            kill_point("after_plan_saved", dag.name)

    def _state(self, dag: AnyDag) -> dict[str, DatasetState]:
        """``dag``'s stored state, read once per run (a reused plan and the plan context share it)."""
        key = (dag.name, dag.scope)
        if key not in self._states:
            self._states[key] = self.store.load_state(self.job, dag.name, dag.scope)
        return self._states[key]

    def context(self, dag: AnyDag) -> PlanContext:
        """Load ``dag``'s state (its scope: live or its backfill's) into this run's copy."""
        state = dict(self._state(dag))  # the run's own copy
        limits = dag.limits or SourceLimitsConf()  # a DAG without limits of its own: the job's budget only
        per_run = limits.budget().tighter(self.job_budget.minus(self.planned))
        first = self.planned == Size(0, 0, 0)
        return PlanContext(
            state=state,
            per_dataset=limits.per_dataset.budget(),
            per_run=per_run,
            now=self.now or utcnow(),
            guarantee=first,
            files_read=functools.cache(lambda: self.store.files_read(self.job, dag.name, dag.scope)),
            pinned_schema=lambda: self.store.pinned_schema(self.job, dag.name),
            pin_schema=lambda fingerprint, ddl: self.store.pin_schema(
                PinnedSchema(self.job, dag.name, fingerprint, ddl, self.run_id, utcnow())
            ),
        )

    def planned_units(self, units: list[WorkUnit]) -> None:
        """Count ``units`` against the job budget (DAGs are planned one after the other)."""
        for unit in units:
            if not unit.empty:
                self.planned = self.planned + unit.size

    # -- publishing ------------------------------------------------------------------------------

    def commit(self, dag: AnyDag, result: DagResult, batch: BatchRef) -> DagResult:
        """Publish what ``dag`` staged: store the commit sequence, run it, mark it done, and write
        every dataset's status row. A step that fails leaves the sequence for the next run."""
        marks = dag.high_marks(result)
        steps = [step for staged in result.staged for step in staged.steps]
        dirs = [staged.staging for staged in result.staged if staged.staging]
        if dirs:
            steps.append(DeleteStaging(dirs))
        files = dag.files_read(result)
        if files:
            steps.append(LogFiles(self.job, dag.name, dag.scope, batch.number, self.run_id, files))
        if marks:
            steps.append(SetWatermarks(self.job, dag.name, dag.scope, self.run_id, marks))
        closing: list[LogRow] = []
        if steps:
            committed = sorted(o.unit.dataset for o in result.datasets if o.status == DatasetStatus.COMMITTED)
            sequence = CommitSequence(self.job, dag.name, dag.scope, batch.number, steps, committed)
            self.guard()
            self._append(sequence.row(self.run_id))
            kill_point("after_sequence_written", dag.name)
            try:
                sequence.run(self._context(fresh=True))
                closing.append(self._row(dag.name, dag.scope, batch.number, DONE))
            except Exception as exc:
                message = first_line(exc)
                log.error("dag %s: publishing batch %d failed: %s", dag.name, batch.number, message)
                closing.append(self._row(dag.name, dag.scope, batch.number, ATTEMPT, message=message))
                result = dag.unpublished(result, f"publishing failed, the next run completes it: {message}")
                marks = {}
        elif result.status == "SUCCEEDED" and self.dag_log(dag.name).find(batch.number):
            closing.append(self._row(dag.name, dag.scope, batch.number, DONE, message="nothing to publish"))
        rows = [self._status_row(dag, o, marks) for o in result.datasets]
        # Two appends to two tables, at once: each is a separate Delta commit either way.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="metadata") as pool:
            writes = [pool.submit(self.store.add_job_status, rows)]
            if closing:
                writes.append(pool.submit(self._append, *closing))
            for write in writes:
                write.result()
        return result

    def blocked_status(self, dag: AnyDag, blocked: Blocked) -> None:
        """Status rows for a DAG skipped because a batch of it is unpublished."""
        status = DatasetStatus.QUARANTINED if blocked.quarantined else DatasetStatus.FAILED
        self.not_run_status(dag, status, blocked.message, blocked.batch.datasets(), scope=blocked.batch.scope)

    def not_run_status(
        self, dag: AnyDag, status: DatasetStatus, message: str, datasets: list[str], *, scope: str | None = None
    ) -> None:
        """Status rows for a DAG that read nothing this run (blocked, skipped or cancelled)."""
        now = utcnow()
        rows = [
            JobStatusRow(
                run_id=self.run_id,
                job=self.job,
                dag=dag.name,
                scope=scope or dag.scope,
                dataset=d,
                status=status,
                message=message[:2000],
                records=0,
                bytes=0,
                executor_seconds=0.0,
                low=None,
                high=None,
                start_time=now,
                end_time=now,
            )
            for d in datasets or [dag.name]
        ]
        self.store.add_job_status(rows)

    def record(self, dag: AnyDag, result: DagResult) -> None:
        """Status rows for a DAG whose result is not published (cancelled)."""
        self.store.add_job_status([self._status_row(dag, o, {}) for o in result.datasets])

    def expected_costs(self) -> dict[str, float]:
        """Each DAG's executor seconds in its last run that recorded any (for ordering)."""
        costs: dict[str, float] = {}
        newest: dict[str, str] = {}
        rows = [r for r in self.store.job_status(self.job, runs=3) if r.executor_seconds > 0]
        for row in sorted(rows, key=lambda r: r.start_time, reverse=True):
            if newest.setdefault(row.dag, row.run_id) == row.run_id:
                costs[row.dag] = costs.get(row.dag, 0.0) + row.executor_seconds
        return costs

    def _status_row(self, dag: AnyDag, o: DatasetOutcome, marks: dict[str, str]) -> JobStatusRow:
        new = marks.get(o.unit.dataset)
        high = watermarks.parse(new) if new else o.unit.low
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
            high=high.display() if high else None,
            start_time=o.start_time,
            end_time=o.end_time,
        )

    def finish(
        self, results: list[DagResult], *, start: datetime, message: str = "", cancelled: bool = False
    ) -> FlowStatusRow:
        datasets = [o for r in results for o in r.datasets]
        committed = sum(1 for o in datasets if o.status == DatasetStatus.COMMITTED)
        failed = sum(1 for o in datasets if o.status == DatasetStatus.FAILED)
        dag_failed = any(r.status != "SUCCEEDED" for r in results)
        if cancelled:
            status = FlowState.CANCELLED
        elif not dag_failed:
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


def _quarantined(batch: Batch, attempts: int, last: str) -> str:
    return (
        f"quarantined: batch {batch.number} could not be published after {attempts} attempts (last: {last}). "
        f"Fix the cause, then `mode=commit commit.action=release commit.dag={batch.dag} commit.reason=...` to "
        "retry it (or `abandon` to drop it)"
    )


def fingerprint(dag: AnyDag) -> str:
    """What a stored plan depends on (a JobDag's source, a copy DAG's config)."""
    return dag.fingerprint()


def _json(mark: object) -> str | None:
    return mark.to_json() if mark is not None else None  # type: ignore[attr-defined]
