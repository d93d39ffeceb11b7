"""Publishing a run's batches and recording how the run went.

The :class:`Publisher` runs commit sequences (a DAG's new batch, or an earlier run's unfinished
one replayed by recovery) and records each transition in the commit log, then writes the
JobStatus row of every dataset and, at the end of the run, its FlowStatus row.
:class:`~engine.runtime.metadata.MetadataManager` decides what a DAG plans; this decides nothing
but what a sequence's outcome was.

Per DAG (see :mod:`engine.commit.log` for the log's rows): :meth:`commit` stores the commit
sequence (publish every sink, delete staging, log the files read, set the committed datasets'
watermarks), runs it and marks it ``done``, or records the failed ``attempt`` and leaves the
sequence for the next run to replay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef
from engine.commit.killpoints import kill_point
from engine.commit.log import Batch, CommitLog
from engine.commit.owners import claim
from engine.commit.sequence import CommitSequence
from engine.commit.steps import DeleteStaging, LogFiles, SetWatermarks, StepContext
from engine.converters.base import first_line
from engine.copy import steps as _copy_steps  # noqa: F401  (registers the step kinds a copy DAG's stored sequence names)
from engine.state import watermarks
from engine.state.conflicts import is_deterministic
from engine.state.rows import FlowStatusRow, JobStatusRow, LogRow, utcnow
from engine.state.status import Status, run_outcome
from engine.state.store import StateStore, StatusStore
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.runtime.dag import AnyDag, DagResult, DatasetOutcome
    from engine.runtime.metadata import Blocked

log = logging.getLogger(__name__)


class Publisher:
    def __init__(
        self,
        *,
        spark: SparkSession,
        state: StateStore,
        status: StatusStore,
        commit_log: CommitLog,
        guard: Callable[[], None] = lambda: None,
        locations: Mapping[str, object] | None = None,
    ) -> None:
        self.spark = spark
        self.state = state
        """Where the sequences' ``SetWatermarks`` and ``LogFiles`` steps write."""
        self.status = status
        self.log = commit_log
        self.guard = guard
        """Raises if this run may no longer publish (it lost the job's lease)."""
        self.locations = dict(locations or {})
        """The job's DAGs' file systems by URL, with their credentials (:meth:`Dag.locations
        <engine.runtime.dag.Dag.locations>`), for the steps that reach them."""

    @property
    def job(self) -> str:
        return self.log.job

    @property
    def run_id(self) -> str:
        return self.log.run_id

    def _context(self, *, fresh: bool) -> StepContext:
        return StepContext(self.spark, self.state, HadoopFs(self.spark), fresh=fresh, locations=self.locations)

    def replay(self, batch: Batch) -> str | None:
        """Run an earlier run's unfinished sequence again (each step verified first, redone if not
        done) and record it ``done``; on failure record the ``attempt`` and return its error."""
        try:
            self.guard()
            CommitSequence.of(self.job, batch).run(self._context(fresh=False))
        except Exception as exc:
            message = first_line(exc)
            final = is_deterministic(exc)
            self.log.write(self.log.attempt(batch.dag, batch.scope, batch.number, message, final=final))
            return message
        self.log.write(self.log.done(batch.dag, batch.scope, batch.number, "recovered"))
        return None

    def commit(self, dag: AnyDag, result: DagResult, batch: BatchRef) -> DagResult:
        """Publish what ``dag`` staged: store the commit sequence, run it, mark it done, and write
        every dataset's status row. A step that fails leaves the sequence for the next run."""
        number = batch.number
        marks = dag.high_marks(result)
        steps = [step for staged in result.staged for step in staged.steps]
        dirs = [staged.staging for staged in result.staged if staged.staging]
        if dirs:
            steps.append(DeleteStaging(dirs))
        files = dag.files_read(result)
        if files:
            steps.append(LogFiles(self.job, dag.name, dag.scope, number, self.run_id, files))
        if marks:
            steps.append(SetWatermarks(self.job, dag.name, dag.scope, self.run_id, marks))
        closing: list[LogRow] = []
        if steps:
            committed = sorted(o.unit.dataset for o in result.datasets if o.status == Status.COMMITTED)
            sequence = CommitSequence(self.job, dag.name, dag.scope, number, steps, committed)
            self.guard()
            self.log.write(self.log.sequence(sequence))
            kill_point("after_sequence_written", dag.name)
            try:
                sequence.run(self._context(fresh=True))
                closing.append(self.log.done(dag.name, dag.scope, number))
            except Exception as exc:
                message = first_line(exc)
                final = is_deterministic(exc)
                log.error("dag %s: publishing batch %d failed: %s", dag.name, number, message)
                closing.append(self.log.attempt(dag.name, dag.scope, number, message, final=final))
                result = dag.unpublished(result, unpublished_message(dag.name, number, message, final=final))
                marks = {}
            else:
                self._claim(dag, result)
        elif result.status == Status.SUCCEEDED and self.log.dag(dag.name).find(number):
            closing.append(self.log.done(dag.name, dag.scope, number, "nothing to publish"))
        rows = [self._status_row(dag, o, marks) for o in result.datasets]
        # Two appends to two tables, at once: each is a separate Delta commit either way.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="metadata") as pool:
            writes = [pool.submit(self.status.add_job_status, rows)]
            if closing:
                writes.append(pool.submit(self.log.write, *closing))
            for write in writes:
                write.result()
        return result

    def _claim(self, dag: AnyDag, result: DagResult) -> None:
        """Record the job as the owner of the places ``dag`` just published ``result`` to, where
        none is (:mod:`engine.commit.owners`)."""
        fs = HadoopFs(self.spark)
        for place, shared in dag.owned_places(result):
            try:
                if fs.exists(place):
                    claim(fs, place, job=self.job, shared=shared, run_id=self.run_id)
            except Exception as exc:  # the batch is published all the same: the next publish claims it
                log.warning("dag %s: could not record job %s as the owner of %s: %s", dag.name, self.job, place, exc)

    def blocked_status(self, dag: AnyDag, blocked: Blocked) -> None:
        """Status rows for a DAG skipped because a batch of it is unpublished."""
        status = Status.QUARANTINED if blocked.quarantined else Status.FAILED
        self.not_run_status(dag, status, blocked.message, blocked.batch.datasets(), scope=blocked.batch.scope)

    def not_run_status(
        self, dag: AnyDag, status: Status, message: str, datasets: list[str], *, scope: str | None = None
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
        self.status.add_job_status(rows)

    def record(self, dag: AnyDag, result: DagResult) -> None:
        """Status rows for a DAG whose result is not published (cancelled)."""
        self.status.add_job_status([self._status_row(dag, o, {}) for o in result.datasets])

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
        """The run's FlowStatus row, written: its outcome is its DAGs' (:func:`run_outcome`)."""
        datasets = [o for r in results for o in r.datasets]
        committed = sum(1 for o in datasets if o.status == Status.COMMITTED)
        row = FlowStatusRow(
            run_id=self.run_id,
            job=self.job,
            status=run_outcome((r.status for r in results), published=committed > 0, cancelled=cancelled),
            message=message or next((r.message for r in results if r.message), ""),
            datasets=len(datasets),
            committed=committed,
            failed=sum(1 for o in datasets if o.status == Status.FAILED),
            records=sum(r.processed for r in results),
            start_time=start,
            end_time=utcnow(),
        )
        self.status.add_flow_status(row)
        return row


def unpublished_message(dag: str, batch: int, message: str, *, final: bool) -> str:
    """What a DAG's status says when publishing its batch failed: the next run completes it, or,
    ``final`` (no retry can mend it), it is quarantined and waits for an operator."""
    if not final:
        return f"publishing failed, the next run completes it: {message}"
    return (
        f"publishing batch {batch} failed, and running it again would fail the same way, so it is "
        f"quarantined (not retried): {message}. {release_hint(dag)}"
    )


def release_hint(dag: str) -> str:
    """How an operator lets a quarantined batch of ``dag`` go on."""
    return (
        f"Fix the cause, then `mode=commit commit.action=release commit.dag={dag} commit.reason=...` to "
        "retry it (or `abandon` to drop it)"
    )
