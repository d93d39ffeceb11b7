"""The runs table: one row per run and JobDag, behind an interface with an in-memory twin.

Rows are append-only: a run appends ``RUNNING`` when a DAG starts and its final status when it
ends; readers keep the newest row per ``(run_id, dag)``. Appends never conflict in Delta, so many
DAGs and many jobs can share one table.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime

from engine.state.status import Status

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    job: str
    dag: str
    status: Status
    start_time: datetime
    end_time: datetime | None = None
    message: str = ""
    records_read: int = 0
    records_written: int = 0
    records_rejected: int = 0

    def finished(self, status: Status, *, end_time: datetime, **counts: int | str) -> RunRecord:
        return replace(self, status=status, end_time=end_time, **counts)  # type: ignore[arg-type]


class RunStore(ABC):
    """Where run history lives."""

    @abstractmethod
    def append(self, record: RunRecord) -> None: ...

    @abstractmethod
    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        """The newest row of each ``(run_id, dag)`` of ``job``, newest runs first."""


class InMemoryRunStore(RunStore):
    """For fast tests: the same contract, no Spark."""

    def __init__(self) -> None:
        self._rows: list[RunRecord] = []
        self._lock = threading.Lock()

    def append(self, record: RunRecord) -> None:
        with self._lock:
            self._rows.append(record)

    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        return latest_per_dag([r for r in self._rows if r.job == job])[:limit]


class WriteBehind(RunStore):
    """``store``'s appends on one thread of their own, in the order given, so a DAG does not wait
    for a Delta commit to start or to end, and a run's last rows land
    while its flow row is written. :meth:`close` waits for them all and raises the first failure;
    :meth:`history` waits first, so it sees every row appended before it."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-rows")
        self._pending: list[Future[None]] = []

    def append(self, record: RunRecord) -> None:
        self._pending.append(self._pool.submit(self.store.append, record))

    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        self.wait()
        return self.store.history(job, limit=limit)

    def wait(self) -> None:
        """Wait for every append so far, whether it succeeds or not."""
        for future in list(self._pending):
            future.exception()

    def close(self) -> None:
        """Wait for every append, stop the thread, and raise the first append that failed."""
        self._pool.shutdown(wait=True)
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()


def latest_per_dag(rows: list[RunRecord]) -> list[RunRecord]:
    latest: dict[tuple[str, str], RunRecord] = {}
    for row in rows:  # rows are in append order: later rows win
        latest[(row.run_id, row.dag)] = row
    return sorted(latest.values(), key=lambda r: (r.start_time, r.dag), reverse=True)
