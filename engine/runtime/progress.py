"""Where each JobDag of a run stands, for the live console view and the final table.

The JobManager moves each DAG through its phases; views (:mod:`engine.cli.progress`) read
:meth:`Board.snapshot` from their own thread. Every update also notifies ``listeners`` so a plain
log view can print one line per change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from engine.state.status import Status

if TYPE_CHECKING:
    from engine.runtime.dag import DagResult

QUEUED = "queued"
PLANNING = "planning"
RUNNING = "running"
PUBLISHING = "publishing"
FINISHED = (Status.SUCCEEDED, Status.PARTIAL, Status.FAILED, Status.QUARANTINED, Status.CANCELLED, Status.SKIPPED)
"""A DAG's phase once it ended: its status."""


@dataclass(frozen=True)
class DagProgress:
    name: str
    phase: str = QUEUED
    """``queued``, ``planning``, ``running``, ``publishing``, or the DAG's final status."""
    records: int | None = None
    """Records read, once known."""
    started: float | None = None
    ended: float | None = None
    message: str = ""
    result: DagResult | None = None
    """What the DAG did, once it ended (for listeners that report it: lineage)."""

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or now or time.monotonic()) - self.started


@dataclass
class Board:
    dags: dict[str, DagProgress] = field(default_factory=dict)
    listeners: list[Callable[[DagProgress], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self.dags.setdefault(name, DagProgress(name))

    def move(
        self, name: str, phase: str, *, records: int | None = None, message: str = "", result: DagResult | None = None
    ) -> None:
        with self._lock:
            old = self.dags.get(name, DagProgress(name))
            now = time.monotonic()
            new = replace(
                old,
                phase=phase,
                records=records if records is not None else old.records,
                started=old.started if old.started is not None or phase == QUEUED else now,
                ended=now if phase in FINISHED else None,
                message=message or old.message,
                result=result,
            )
            self.dags[name] = new
            listeners = list(self.listeners)
        for listener in listeners:
            listener(new)

    def phase(self, name: str) -> str:
        with self._lock:
            return self.dags[name].phase if name in self.dags else QUEUED

    def snapshot(self) -> list[DagProgress]:
        with self._lock:
            return list(self.dags.values())
