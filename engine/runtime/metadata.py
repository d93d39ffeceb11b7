"""The metadata manager (Marmaray's): a run's planning context (its in-memory copy of each DAG's
state, the job budget) and the commit-log decisions taken before a DAG reads anything. Publishing
and the status rows are the :class:`~engine.runtime.publisher.Publisher`'s (:attr:`publisher`),
which shares this run's view of the commit log.

Per DAG, in order (see :mod:`engine.commit.log` for the log's rows):

1. :meth:`recover`: replay the DAG's unfinished commit sequences (each step verified, redone if
   not done). A DAG whose replay fails is skipped this run; after ``publish.max_attempts`` failed
   attempts its batch is quarantined until an operator releases or abandons it.
2. :meth:`batch`: the DAG's open plan (stored by an earlier run that never published it) is
   re-executed as it is, under its own batch number; otherwise a new batch number is drawn.
3. :meth:`begin`: a new plan is stored before any data is read.
4. ``publisher.commit``: after the sinks staged their data, the commit sequence is stored, then
   run, then marked done (:meth:`Publisher.commit <engine.runtime.publisher.Publisher.commit>`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.commit import plan_codec
from engine.commit.batch import BatchRef
from engine.commit.killpoints import kill_point
from engine.commit.log import Batch, CommitLog, DagLog, is_final
from engine.runtime.lost_state import lost_state
from engine.runtime.publisher import Publisher, release_hint
from engine.sources.base import PlanContext
from engine.sources.conf import SourceLimitsConf
from engine.sources.workunits import Budget, Size, WorkUnit
from engine.state.errors import StateLostError
from engine.state.rows import DatasetState, LogRow, PinnedSchema, utcnow
from engine.state.store import MetadataStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.runtime.dag import AnyDag

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
        locations: Mapping[str, object] | None = None,
    ) -> None:
        self.store = store
        self.spark = spark
        self.job = job
        self.run_id = run_id
        self.now = now
        """A fixed clock for planning; ``None``: each DAG plans at its own start (a DAG that runs
        ``after`` another sees the files its upstream wrote in the same run)."""
        self.job_budget = job_budget or Budget()
        self.planned = Size(0, 0, 0)
        """What the DAGs planned so far take of the job budget."""
        self.commit_log = CommitLog(store, job, run_id)
        """This run's view of the job's commit log (read once, then kept up to date)."""
        self.publisher = Publisher(
            spark=spark, state=store, status=store, commit_log=self.commit_log, guard=guard, locations=locations
        )
        """Publishes the DAGs' batches and writes the status rows; shares :attr:`commit_log`."""
        self._stale: list[LogRow] = []
        self._references: dict[str, dict[str, int]] = {}
        """``abandoned`` rows for open plans that no longer fit, written with the next plan."""
        self._states: dict[tuple[str, str], dict[str, DatasetState]] = {}
        self.recovered: dict[str, list[int]] = {}
        """Batches each DAG's recovery published this run."""

    def dag_log(self, dag: str) -> DagLog:
        return self.commit_log.dag(dag)

    def check_state(self, dags: list[AnyDag]) -> None:
        """Refuse the run, before anything is written, if a DAG's state was lost (its table deleted
        or emptied while the commit log, the file log or the job status show committed batches).
        The state is read for planning anyway; only an empty one costs a look at the evidence."""
        for dag in dags:
            lost = lost_state(
                self.store, self.commit_log.rows, job=self.job, dag=dag.name, scope=dag.scope, state=self._state(dag)
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
            if batch.quarantined(max_attempts):
                return Blocked(batch, True, _quarantined(batch, len(failures), failures[-1].message))
            log.info(
                "dag %s: recovering batch %d (attempt %d of %d)",
                dag.name,
                batch.number,
                len(failures) + 2,
                max_attempts,
            )
            message = self.publisher.replay(batch)
            if message is not None:
                batch = self.dag_log(dag.name).find(batch.number) or batch  # with the attempt just logged
                if batch.quarantined(max_attempts):
                    return Blocked(batch, True, _quarantined(batch, len(failures) + 1, message))
                return Blocked(
                    batch,
                    False,
                    f"publishing batch {batch.number} (left by an earlier run) failed again "
                    f"(attempt {len(failures) + 1} of {max_attempts}; the next run retries): {message}",
                )
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
        units: list[WorkUnit] = plan_codec.decode(body["units"])
        state = self._state(dag)
        stale = body.get("fingerprint") != fingerprint(dag) or any(
            _json(u.low) != _json(state[u.dataset].watermark if u.dataset in state else None) for u in units
        )
        # A later batch of the DAG (another scope's: live, a backfill, a replay) took a number since:
        # Delta would skip this one's commits, their txnVersion being below that batch's.
        overtaken = found.number < dlog.next_batch() - 1
        if stale or overtaken:  # or the source's config or a checkpoint changed: nothing was published, plan anew
            why = "a later batch was planned since" if overtaken and not stale else "plan out of date"
            log.info("dag %s: the open plan of batch %d no longer fits (%s): planned anew", dag.name, found.number, why)
            self._stale.append(self.commit_log.abandoned(dag.name, dag.scope, found.number, why))
            return dlog.next_batch(), None
        log.info("dag %s: re-executing the stored plan of batch %d", dag.name, found.number)
        self._references[dag.name] = dict(body.get("references", {}))
        return found.number, units

    def references(self, dag: AnyDag) -> dict[str, int] | None:
        """The reference versions the stored plan :meth:`batch` re-executes read (a lookup's,
        by step), so the batch joins what it joined the first time; ``None`` for a new plan."""
        return self._references.get(dag.name)

    def begin(
        self,
        dag: AnyDag,
        units: list[WorkUnit],
        batch: BatchRef,
        *,
        reused: bool,
        references: dict[str, int] | None = None,
    ) -> None:
        """Store the batch plan before any data is read (a re-executed plan is already stored),
        with the versions of the references its steps read (:meth:`references`)."""
        rows = [r for r in self._stale if r.dag == dag.name]
        if not reused and any(not u.empty for u in units):
            body: dict[str, Any] = {
                "datasets": sorted(u.dataset for u in units if not u.empty),
                "fingerprint": fingerprint(dag),
                "units": plan_codec.encode(units),
            }
            if references:
                body["references"] = references
            rows.append(self.commit_log.plan(dag.name, dag.scope, batch.number, body))
        if rows:
            self.commit_log.write(*rows)
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
            checked_chain=lambda: self.store.chain_checked(self.job, dag.name),
            chain_passed=lambda key: self.store.chain_passed(self.job, dag.name, key),
        )

    def planned_units(self, units: list[WorkUnit]) -> None:
        """Count ``units`` against the job budget (DAGs are planned one after the other)."""
        for unit in units:
            if not unit.empty:
                self.planned = self.planned + unit.size

    def expected_costs(self) -> dict[str, float]:
        """Each DAG's executor seconds in its last run that recorded any (for ordering)."""
        costs: dict[str, float] = {}
        newest: dict[str, str] = {}
        rows = [r for r in self.store.job_status(self.job, runs=3) if r.executor_seconds > 0]
        for row in sorted(rows, key=lambda r: r.start_time, reverse=True):
            if newest.setdefault(row.dag, row.run_id) == row.run_id:
                costs[row.dag] = costs.get(row.dag, 0.0) + row.executor_seconds
        return costs


def _quarantined(batch: Batch, attempts: int, last: str) -> str:
    if any(is_final(r) for r in batch.failures()):
        why = f"publishing it failed in a way no retry can mend ({last})"
    else:
        why = f"it could not be published after {attempts} attempts (last: {last})"
    return f"quarantined: batch {batch.number}: {why}. {release_hint(batch.dag)}"


def fingerprint(dag: AnyDag) -> str:
    """What a stored plan depends on (a JobDag's source, a copy DAG's config)."""
    return dag.fingerprint()


def _json(mark: object) -> str | None:
    return mark.to_json() if mark is not None else None  # type: ignore[attr-defined]
