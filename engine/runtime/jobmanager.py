"""The JobManager: runs every DAG of a job on threads in one Spark application.

Planning first recovers each DAG's unpublished batches (the commit log), then plans every DAG that
depends on no other (state loaded, work units computed or an open plan taken again, chains
checked), so a config mistake in any of them stops the job before any data is written. A DAG that
runs ``after`` others is checked the same way, except that an input one of its upstreams writes
need not exist yet (:func:`~engine.spec.places.made_upstream`), and planned when it starts.
``validate`` follows the same rule.

DAGs then run ``parallelism`` at a time (:mod:`engine.runtime.graph`): higher ``priority`` first,
then the one that cost most in its last run, each in its own SQL session, FAIR scheduler pool and
job tag. One DAG failing does not stop the others; its dependents are skipped. Each DAG publishes
on its own: its publish policy decides which of its datasets advance, and its commit sequence
makes that exactly-once. When the run is asked to stop, no DAG starts, running DAGs are cancelled
unless already publishing (a publish in progress completes), and nothing half-done is published.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef
from engine.converters.base import first_line
from engine.errors import JobFailedError
from engine.runtime import progress as phases
from engine.runtime.dag import AnyDag, Connections, DagPlan, DagResult, dag_for
from engine.runtime.graph import Node, Outcome, run_graph
from engine.runtime.metadata import Blocked, MetadataManager
from engine.runtime.progress import Board
from engine.runtime.publisher import Publisher
from engine.runtime.scope import DagScope, scope_for
from engine.runtime.session import child_session
from engine.runtime.stop import Stop
from engine.sinks.error_table import ErrorTable, ReplayedTable
from engine.spec import JobSpec
from engine.spec.places import made_upstream
from engine.state import RunRecord, RunStore
from engine.state.backends import AUTO
from engine.state.runs import WriteBehind
from engine.state.status import Status, run_outcome
from engine.state.store import FlowStatusRow, InMemoryMetadataStore, MetadataStore, utcnow
from engine.storage.options import store_options

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    job: str
    run_id: str
    dags: list[DagResult]
    seconds: float
    flow: FlowStatusRow | None = None

    stopped: Stop | None = None
    """Set when the run was asked to stop."""

    @property
    def status(self) -> Status:
        """The flow row's (decided once, by :meth:`Publisher.finish`), unless stopped since."""
        if self.stopped is not None and self.stopped.is_set():
            return Status.CANCELLED
        return self.flow.status if self.flow is not None else run_outcome(d.status for d in self.dags)

    def summary(self) -> dict[str, Any]:
        """The one-line JSON summary's content."""
        out = {
            "run_id": self.run_id,
            "job": self.job,
            "status": self.status,
            "records_read": sum(d.processed for d in self.dags),
            "errors": sum(d.rejected for d in self.dags),
            "sinks": {f"{d.name}.{sink}": n for d in self.dags for sink, n in d.sinks.items()},
            "failed_dags": [d.name for d in self.dags if d.status != Status.SUCCEEDED],
            "execute_seconds": round(self.seconds, 3),
            "dags": [d.as_dict() for d in self.dags],
        }
        if self.stopped is not None and self.stopped.is_set():
            out["stopped_by"] = self.stopped.reason
        return out


@dataclass
class PlannedDag:
    """One DAG ready to run: planned now, planned when it starts (``after`` others), or blocked."""

    dag: AnyDag
    plan: DagPlan | None = None
    batch: BatchRef | None = None
    reused: bool = False
    """The plan is an earlier run's, re-executed."""
    blocked: Blocked | None = None
    """A batch of this DAG is not yet published: it plans nothing this run."""


@dataclass
class PlannedJob:
    """Every DAG of a job with its checked plan: nothing has been written yet."""

    spec: JobSpec
    run_id: str
    dags: list[PlannedDag]
    metadata: MetadataManager
    costs: dict[str, float] = field(default_factory=dict)
    """Each DAG's executor seconds in its last run: the bigger starts first."""
    start: datetime = field(default_factory=utcnow)

    @property
    def publisher(self) -> Publisher:
        return self.metadata.publisher


class JobManager:
    def __init__(
        self,
        spark: SparkSession,
        metadata: MetadataStore | None = None,
        *,
        guard: Callable[[], None] = lambda: None,
        backend: str = AUTO,
        connections: Connections | None = None,
    ) -> None:
        self.spark = spark
        self.connections = connections
        """A URL's options from the run's named connections (copy DAGs open their file systems with them)."""
        self.metadata = metadata if metadata is not None else InMemoryMetadataStore()
        self.backend = backend
        """How the error tables are reached, as the metadata tables are (``metadata.backend``)."""
        self.guard = guard
        """Raises if this run may no longer publish (it lost the job's lease); called before each
        commit sequence runs."""
        self._planning = threading.Lock()
        """DAGs planned when they start share the run's metadata manager (and the job budget)."""
        self._phases = threading.Lock()

    def validate(self, spec: JobSpec, run_id: str) -> None:
        """Check every DAG as :meth:`plan` does, without listing inputs or running any Spark job:
        an input an upstream DAG writes need not exist yet."""
        for dag in self._dags(spec, run_id):
            dag.validate(self.spark, inputs_may_not_exist=made_upstream(spec, dag.spec))

    def plan(self, spec: JobSpec, run_id: str) -> PlannedJob:
        """Recover, plan and check every DAG; a config mistake raises before any write."""
        dags = self._dags(spec, run_id)
        manager = MetadataManager(
            self.metadata,
            spark=self.spark,
            job=spec.name,
            run_id=run_id,
            job_budget=spec.limits.budget(),
            guard=self.guard,
            locations={url: fs for dag in dags for url, fs in dag.locations().items()},
        )
        planned = []
        manager.check_state(dags)  # before any recovery writes
        for dag in dags:
            stuck = manager.recover(dag)
            if stuck is not None:
                log.error("dag %s: %s", dag.name, stuck.message)
                planned.append(PlannedDag(dag, blocked=stuck))
            elif dag.spec.after:
                dag.validate(self.spark, inputs_may_not_exist=made_upstream(spec, dag.spec))
                planned.append(PlannedDag(dag))
            else:
                planned.append(self._plan_one(manager, dag))
        costs = manager.expected_costs() if len(planned) > 1 else {}
        return PlannedJob(spec=spec, run_id=run_id, dags=planned, metadata=manager, costs=costs)

    def _plan_one(self, manager: MetadataManager, dag: AnyDag) -> PlannedDag:
        number, reuse = manager.batch(dag)
        plan = dag.plan(self.spark, manager.context(dag), reuse=reuse, references=manager.references(dag))
        manager.planned_units(plan.units)
        return PlannedDag(dag, plan, BatchRef(manager.job, dag.name, number), reused=reuse is not None)

    def execute(
        self, job: PlannedJob, store: RunStore, *, stop: Stop | None = None, board: Board | None = None
    ) -> JobResult:
        """Run the planned DAGs, ``parallelism`` at a time, dependencies first, recording each in
        ``store``; ``stop`` asks the run to stop (see the module docstring)."""
        started = time.monotonic()
        stop = stop or Stop()
        board = board or Board()
        board.add([p.dag.name for p in job.dags])
        for path in sorted({p.dag.spec.error_table for p in job.dags if p.dag.spec.error_table}):
            ErrorTable(path).ensure(self.spark, backend=self.backend, options=self._options(path))  # before concurrency
        for path in sorted({m for p in job.dags if (m := getattr(p.dag.spec, "replay_marks", None))}):
            ReplayedTable(path).ensure(self.spark, backend=self.backend, options=self._options(path))
        by_name = {p.dag.name: p for p in job.dags}
        scopes = {n: scope_for(job.run_id, n, p.dag.spec.pool_name) for n, p in by_name.items()}
        finished = threading.Event()
        threading.Thread(
            target=self._cancel_on_stop, args=(stop, finished, board, scopes), name="jobdag-cancel", daemon=True
        ).start()
        runs = WriteBehind(store)  # nothing in the run reads its run rows back
        try:
            outcomes = run_graph(
                _nodes(job),
                lambda node: self._run_node(job, by_name[node.name], runs, scopes[node.name], stop, board),
                parallelism=job.spec.parallelism,
                ok=lambda r: r.status == Status.SUCCEEDED,
                stop=stop.event,
                thread_name_prefix="jobdag",
            )
            results = [self._outcome(job, by_name[o.name], o, runs, board) for o in outcomes.values()]
            for result in results:
                result.recovered = job.metadata.recovered.get(result.name, [])
            flow = job.publisher.finish(results, start=job.start, cancelled=stop.is_set())  # as the run rows land
        except BaseException:
            _close_quietly(runs, job.run_id)
            raise
        finally:
            finished.set()
        _close(runs, job, flow)
        return JobResult(
            job=job.spec.name,
            run_id=job.run_id,
            dags=results,
            seconds=time.monotonic() - started,
            flow=flow,
            stopped=stop,
        )

    def _options(self, path: str) -> dict[str, str]:
        """What delta-rs needs to reach the table at ``path`` (the run's connection serving it)."""
        return store_options(path, connection=(self.connections(path) if self.connections else None) or None)

    def run(self, spec: JobSpec, run_id: str, store: RunStore, *, stop: Stop | None = None) -> JobResult:
        return self.execute(self.plan(spec, run_id), store, stop=stop)

    def _dags(self, spec: JobSpec, run_id: str) -> list[AnyDag]:
        return [dag_for(d, job=spec.name, run_id=run_id, connections=self.connections) for d in spec.dags]

    # -- one DAG ---------------------------------------------------------------------------------

    def _run_node(
        self, job: PlannedJob, planned: PlannedDag, store: RunStore, scope: DagScope, stop: Stop, board: Board
    ) -> DagResult:
        dag = planned.dag
        if planned.blocked is not None:
            return self._blocked(job, planned.dag, planned.blocked, board)
        record = RunRecord(
            run_id=job.run_id, job=job.spec.name, dag=dag.name, status=Status.RUNNING, start_time=utcnow()
        )
        if planned.plan is None or not all(u.empty for u in planned.plan.units):
            store.append(record)  # a DAG planned with nothing to do ends at once: only its final row
        sc = self.spark.sparkContext
        started = time.monotonic()
        with scope.entered(sc, f"{job.run_id}:{dag.name}", f"{job.spec.name}/{dag.name}"):
            try:
                result = self._plan_and_run(job, planned, scope, stop, board)
            except Exception as exc:  # one DAG's failure must not stop the others
                result = self._failed(job, planned, exc, stop, started)
        result.seconds = time.monotonic() - started  # planning (if deferred) to published
        store.append(
            record.finished(
                Status(result.status),
                end_time=utcnow(),
                message=result.message,
                records_read=result.processed,
                records_written=result.records_written,
                records_rejected=result.rejected,
            )
        )
        board.move(dag.name, result.status, records=result.processed, message=result.message, result=result)
        return result

    def _plan_and_run(
        self, job: PlannedJob, planned: PlannedDag, scope: DagScope, stop: Stop, board: Board
    ) -> DagResult:
        dag = planned.dag
        if planned.plan is None:  # it runs after others: plan it now that they are done
            board.move(dag.name, phases.PLANNING)
            with self._planning:
                planned = self._plan_one(job.metadata, dag)
        assert planned.plan is not None and planned.batch is not None
        board.move(dag.name, phases.RUNNING)
        batch = replace(planned.batch, epoch=job.metadata.store.log_epoch())
        job.metadata.begin(dag, planned.plan.units, batch, reused=planned.reused, references=planned.plan.references)
        session = child_session(self.spark)  # the DAG's own SQL settings and temporary views
        result: DagResult = dag.run(
            session,
            planned.plan,
            batch,
            scope=scope,
            stop=stop,
            on_read=lambda n: board.move(dag.name, phases.RUNNING, records=n),
        )
        with self._phases:  # from here on, a stop no longer cancels this DAG's Spark jobs
            if stop.is_set() and result.status != Status.CANCELLED:
                result = dag.cancelled(planned.plan.units, time.monotonic() - result.seconds, stop.reason)
            if result.status != Status.CANCELLED:
                board.move(dag.name, phases.PUBLISHING)
        if result.status == Status.CANCELLED:
            job.publisher.record(dag, result)
            return result
        return job.publisher.commit(dag, result, batch)

    def _failed(self, job: PlannedJob, planned: PlannedDag, exc: Exception, stop: Stop, started: float) -> DagResult:
        """The result of a DAG that raised before publishing; while stopping, its Spark jobs were
        cancelled: that is a cancelled DAG, not a failed one."""
        dag = planned.dag
        if stop.is_set():
            units = planned.plan.units if planned.plan else []
            result: DagResult = dag.cancelled(units, started, stop.reason)
            job.publisher.record(dag, result)
            return result
        log.error("dag %s failed: %s", dag.name, first_line(exc), exc_info=log.isEnabledFor(logging.DEBUG))
        return DagResult(
            name=dag.name, status=Status.FAILED, message=first_line(exc), seconds=time.monotonic() - started
        )

    def _blocked(self, job: PlannedJob, dag: AnyDag, stuck: Blocked, board: Board) -> DagResult:
        job.publisher.blocked_status(dag, stuck)
        status = Status.QUARANTINED if stuck.quarantined else Status.FAILED
        result = DagResult(name=dag.name, status=status, message=stuck.message)
        board.move(dag.name, status, message=stuck.message, result=result)
        return result

    def _outcome(
        self, job: PlannedJob, planned: PlannedDag, outcome: Outcome[DagResult], store: RunStore, board: Board
    ) -> DagResult:
        """The DAG's result; for one that never ran (skipped, cancelled), its status rows too."""
        if outcome.value is not None:
            return outcome.value
        dag = planned.dag
        status = Status(outcome.status)
        datasets = [u.dataset for u in planned.plan.units if not u.empty] if planned.plan else []
        job.publisher.not_run_status(dag, status, outcome.reason, datasets)
        now = utcnow()
        store.append(RunRecord(job.run_id, job.spec.name, dag.name, Status(outcome.status), now, now, outcome.reason))
        result = DagResult(name=dag.name, status=outcome.status, message=outcome.reason)
        board.move(dag.name, outcome.status, message=outcome.reason, result=result)
        log.warning("dag %s: %s", dag.name, outcome.reason)
        return result

    def _cancel_on_stop(self, stop: Stop, finished: threading.Event, board: Board, scopes: dict[str, DagScope]) -> None:
        """Once ``stop`` is set, cancel the Spark jobs of every DAG not yet publishing."""
        while not stop.event.wait(0.5):
            if finished.is_set():
                return
        with self._phases:
            for name, scope in scopes.items():
                if board.phase(name) in (phases.PLANNING, phases.RUNNING):
                    log.warning("dag %s: cancelling its Spark jobs (%s)", name, stop.reason)
                    scope.cancel(self.spark.sparkContext)


def _nodes(job: PlannedJob) -> list[Node]:
    """The graph's nodes: each DAG with what it runs after, its priority and its last cost."""
    return [
        Node(p.dag.name, p.dag.spec.after, p.dag.spec.priority, job.costs.get(p.dag.name, 0.0), i)
        for i, p in enumerate(job.dags)
    ]


def _close_quietly(runs: WriteBehind, run_id: str) -> None:
    """Wait for the run rows while an error is in flight: that error says more than a run row's."""
    try:
        runs.close()
    except BaseException as late:
        log.warning("run rows of run %s were not all written: %s", run_id, late)


def _close(runs: WriteBehind, job: PlannedJob, flow: FlowStatusRow) -> None:
    """Wait for the run rows; a row that failed to land fails the run, whose flow row did land."""
    try:
        runs.close()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a pyo3 panic is not an Exception
        raise JobFailedError(
            f"run {job.run_id} of job {job.spec.name!r} finished and its flow row says {flow.status.value}, "
            f"but its run rows were not all written, so `history` will not show every DAG of it: {exc}"
        ) from exc
