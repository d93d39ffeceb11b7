"""The runs table: one row per run and JobDag, behind an interface with an in-memory twin.

Rows are append-only: a run appends ``RUNNING`` when a DAG starts and its final status when it
ends; readers keep the newest row per ``(run_id, dag)``. Appends never conflict in Delta, so many
DAGs and many jobs can share one table.
"""

from __future__ import annotations

import enum
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import datetime

SCHEMA_VERSION = 1


class RunStatus(str, enum.Enum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    PARTIAL = "PARTIAL"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"
    QUARANTINED = "QUARANTINED"


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    job: str
    dag: str
    status: RunStatus
    start_time: datetime
    end_time: datetime | None = None
    message: str = ""
    records_read: int = 0
    records_written: int = 0
    records_rejected: int = 0

    def finished(self, status: RunStatus, *, end_time: datetime, **counts: int | str) -> RunRecord:
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


def latest_per_dag(rows: list[RunRecord]) -> list[RunRecord]:
    latest: dict[tuple[str, str], RunRecord] = {}
    for row in rows:  # rows are in append order: later rows win
        latest[(row.run_id, row.dag)] = row
    return sorted(latest.values(), key=lambda r: (r.start_time, r.dag), reverse=True)
