"""The commit log: a write-ahead log of each DAG's batches, kept in ``_engine/commit_log``.

A batch is numbered per ``(job, dag)`` (monotonic; Delta sinks use it as ``txnVersion``). Its rows:

- ``plan``: the work units and their watermark intervals, stored before any data is read. A plan
  with nothing after it is *open*: the next run re-executes it (same units, same batch number)
  instead of planning a new, wider range.
- ``sequence``: the commit steps, stored after the data is staged and before any step runs.
- ``attempt``: a run of the sequence that failed, with the error (and whether no retry can mend it).
- ``done``: every step is done.
- ``released``: an operator reset the failed attempts of a quarantined batch (it is retried).
- ``abandoned``: an operator dropped the batch (its remaining steps never run).

A sequence without ``done`` or ``abandoned`` is *unfinished*; recovery replays it before the DAG
plans new work. After ``max_attempts`` failed attempts since the last release, or one that no
retry can mend (the table refuses the data: a constraint, a MERGE's cardinality), the batch is
*quarantined*: its DAG is skipped (the rest of the job goes on) until an operator releases or
abandons it.

:class:`CommitLog` owns every transition (``plan``, ``sequence``, ``attempt``, ``done``,
``released``, ``abandoned``) and is the only place these rows are built; each write is one append
(one Delta commit), which is what makes a transition atomic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.state.rows import LogRow, utcnow
from engine.state.store import CommitLogStore

if TYPE_CHECKING:
    from engine.commit.sequence import CommitSequence

PLAN, SEQUENCE, ATTEMPT, DONE, RELEASED, ABANDONED = "plan", "sequence", "attempt", "done", "released", "abandoned"
CLOSED = (DONE, ABANDONED)


@dataclass
class Batch:
    dag: str
    scope: str
    number: int
    rows: list[LogRow] = field(default_factory=list)

    def _last(self, kind: str) -> LogRow | None:
        return next((r for r in reversed(self.rows) if r.kind == kind), None)

    @property
    def plan(self) -> LogRow | None:
        return self._last(PLAN)

    @property
    def sequence(self) -> LogRow | None:
        return self._last(SEQUENCE)

    @property
    def closed(self) -> bool:
        return any(r.kind in CLOSED for r in self.rows)

    @property
    def open_plan(self) -> bool:
        return self.plan is not None and self.sequence is None and not self.closed

    @property
    def unfinished(self) -> bool:
        return self.sequence is not None and not self.closed

    def failures(self) -> list[LogRow]:
        """Failed attempts since the last release."""
        out: list[LogRow] = []
        for r in self.rows:
            if r.kind == RELEASED:
                out = []
            elif r.kind == ATTEMPT:
                out.append(r)
        return out

    def quarantined(self, max_attempts: int) -> bool:
        """Unfinished, and failed ``max_attempts`` times since the last release, or once in a way
        no retry can mend (:meth:`CommitLog.attempt`'s ``final``)."""
        failures = self.failures()
        return self.unfinished and (len(failures) >= max_attempts or any(is_final(r) for r in failures))

    def steps(self) -> list[dict[str, Any]]:
        assert self.sequence is not None
        return list(json.loads(self.sequence.body)["steps"])

    def datasets(self) -> list[str]:
        row = self.sequence or self.plan
        return list(json.loads(row.body).get("datasets", [])) if row else []


def is_final(row: LogRow) -> bool:
    """Whether a failed ``attempt`` said no retry can mend it (older rows say nothing: retried)."""
    return row.kind == ATTEMPT and bool(row.body) and bool(json.loads(row.body).get("final"))


class DagLog:
    """The commit log of one ``(job, dag)``."""

    def __init__(self, dag: str, rows: list[LogRow]) -> None:
        self.dag = dag
        batches: dict[int, Batch] = {}
        for r in rows:
            if r.dag == dag:
                batches.setdefault(r.batch, Batch(dag, r.scope, r.batch)).rows.append(r)
        self.batches = [batches[n] for n in sorted(batches)]

    def next_batch(self) -> int:
        return max((b.number for b in self.batches), default=0) + 1

    def open_plan(self, scope: str) -> Batch | None:
        return next((b for b in reversed(self.batches) if b.scope == scope and b.open_plan), None)

    def unfinished(self) -> list[Batch]:
        return [b for b in self.batches if b.unfinished]

    def find(self, number: int) -> Batch | None:
        return next((b for b in self.batches if b.number == number), None)


@dataclass(frozen=True)
class Pending:
    """An unfinished batch, as ``mode=status`` and ``mode=commit`` show it."""

    dag: str
    scope: str
    batch: int
    state: str
    """``unfinished`` (the next run replays it) or ``quarantined`` (waits for an operator)."""
    attempts: int
    last_error: str
    written_by: str
    datasets: int


def pending(rows: list[LogRow], max_attempts: dict[str, int]) -> list[Pending]:
    """Every unfinished batch of the job whose log ``rows`` are, by DAG and batch."""
    out = []
    for dag in sorted({r.dag for r in rows}):
        for b in DagLog(dag, rows).unfinished():
            fails = b.failures()
            quarantined = b.quarantined(max_attempts.get(dag, 3))
            seq = b.sequence
            out.append(
                Pending(
                    dag=dag,
                    scope=b.scope,
                    batch=b.number,
                    state="quarantined" if quarantined else "unfinished",
                    attempts=len(fails),
                    last_error=fails[-1].message if fails else "",
                    written_by=seq.run_id if seq else "",
                    datasets=len(b.datasets()),
                )
            )
    return out


MESSAGE_LIMIT = 4000
"""How much of a failed attempt's error a row keeps."""


class CommitLog:
    """The commit log of one job as one run sees it: the rows read when the run started plus those
    it wrote since. Transitions build rows (each stamped with the run and the time); :meth:`write`
    appends rows in one commit, so rows that must land together (an ``abandoned`` stale plan and
    the new ``plan``) are passed together."""

    def __init__(self, store: CommitLogStore, job: str, run_id: str, rows: list[LogRow] | None = None) -> None:
        self.store = store
        self.job = job
        self.run_id = run_id
        self.rows = store.read_log(job) if rows is None else rows

    def dag(self, dag: str) -> DagLog:
        return DagLog(dag, self.rows)

    def pending(self, max_attempts: dict[str, int]) -> list[Pending]:
        return pending(self.rows, max_attempts)

    def write(self, *rows: LogRow) -> None:
        """Append ``rows`` in one commit, then to this run's view of the log."""
        self.store.append_log(list(rows))
        self.rows.extend(rows)

    # -- transitions: each builds the row that records it ---------------------------------------

    def plan(self, dag: str, scope: str, batch: int, body: dict[str, Any]) -> LogRow:
        """The batch's work units, stored before any data is read."""
        return self._row(dag, scope, batch, PLAN, body=json.dumps(body))

    def sequence(self, sequence: CommitSequence) -> LogRow:
        """The batch's commit steps, stored before any of them runs."""
        body = {"datasets": sequence.datasets, "steps": [s.to_json() for s in sequence.steps]}
        return self._row(sequence.dag, sequence.scope, sequence.batch, SEQUENCE, body=json.dumps(body))

    def attempt(self, dag: str, scope: str, batch: int, error: str, *, final: bool = False) -> LogRow:
        """A run of the sequence failed with ``error``; ``final``: in a way that running it again
        as it is cannot mend (the data or the table refuses it), so the batch is quarantined at
        once instead of being retried."""
        body = json.dumps({"final": True}) if final else ""
        return self._row(dag, scope, batch, ATTEMPT, body=body, message=error[:MESSAGE_LIMIT])

    def done(self, dag: str, scope: str, batch: int, note: str = "") -> LogRow:
        """Every step is done (``note``: how, when not by this run's own sequence)."""
        return self._row(dag, scope, batch, DONE, message=note)

    def released(self, dag: str, scope: str, batch: int, why: str) -> LogRow:
        """An operator reset a quarantined batch's failed attempts: the next run retries it."""
        return self._row(dag, scope, batch, RELEASED, message=why)

    def abandoned(self, dag: str, scope: str, batch: int, why: str) -> LogRow:
        """The batch is dropped: an operator's decision, or a stale open plan."""
        return self._row(dag, scope, batch, ABANDONED, message=why)

    def _row(self, dag: str, scope: str, batch: int, kind: str, *, body: str = "", message: str = "") -> LogRow:
        return LogRow(self.job, dag, scope, batch, kind, self.run_id, utcnow(), body, message)
