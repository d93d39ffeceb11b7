"""The console while a job runs, and the table at its end.

On a terminal (``spark-submit.sh`` sets ``ENGINE_TTY=1`` when its stdout is one), a live view
redraws one line per DAG (phase, records, elapsed) every second, log lines printed above it;
elsewhere (a scheduler's log file) every change is one log line and a
heartbeat every ``heartbeat`` seconds lists what is running. The final table goes to stdout,
before the one-line JSON summary (always the last line).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from engine.runtime.progress import QUEUED, Board, DagProgress
from engine.spec.app import PROGRESS_VIEWS

log = logging.getLogger("engine.progress")
MODES = PROGRESS_VIEWS


@contextmanager
def shown(board: Board, mode: str = "auto", *, out: IO[str] | None = None, heartbeat: float = 30.0) -> Iterator[None]:
    out = out or sys.stdout
    if mode == "auto":  # under spark-submit the driver writes into a pipe: the wrapper says if it ends in a terminal
        mode = "live" if out.isatty() or os.environ.get("ENGINE_TTY") == "1" else "log"
    view: _LiveView | _LogView | None = None
    if mode == "live":
        view = _LiveView(board, out)
    elif mode == "log":
        view = _LogView(board, heartbeat)
    if view is None:
        yield
        return
    view.start()
    try:
        yield
    finally:
        view.stop()


def _line(p: DagProgress, width: int) -> str:
    records = "" if p.records is None else f"{p.records:,} records"
    elapsed = "" if p.phase == QUEUED else f"{p.elapsed():.0f}s"
    return f"  {p.name:<{width}}  {p.phase:<11} {records:>18}  {elapsed:>6}"


class _LogView:
    def __init__(self, board: Board, heartbeat: float) -> None:
        self.board, self.heartbeat = board, heartbeat
        self._done = threading.Event()
        self._logged: dict[str, str] = {}
        """The phase each DAG's last line showed: a count moving within a phase is no new line."""
        self._lock = threading.Lock()

    def _changed(self, p: DagProgress) -> None:
        with self._lock:
            if self._logged.get(p.name) == p.phase:
                return
            self._logged[p.name] = p.phase
        extra = f", {p.records:,} records" if p.records is not None and p.finished else ""
        took = f" in {p.elapsed():.1f}s" if p.finished else ""
        log.info("dag %s: %s%s%s", p.name, p.phase.lower() if p.finished else p.phase, took, extra)

    def _beat(self) -> None:
        while not self._done.wait(self.heartbeat):
            dags = self.board.snapshot()
            running = [f"{p.name} ({p.phase}, {p.elapsed():.0f}s)" for p in dags if not p.finished and p.started]
            finished = sum(1 for p in dags if p.finished)
            queued = sum(1 for p in dags if p.phase == QUEUED)
            log.info("progress: %d done, %d queued, running: %s", finished, queued, ", ".join(running) or "-")

    def start(self) -> None:
        self.board.listeners.append(self._changed)
        threading.Thread(target=self._beat, name="progress-log", daemon=True).start()

    def stop(self) -> None:
        self._done.set()
        self.board.listeners.remove(self._changed)


class _LiveView:
    """Redraws its lines in place; log records are written above it through :class:`_Above`."""

    def __init__(self, board: Board, out: IO[str]) -> None:
        self.board, self.out = board, out
        self.lock = threading.RLock()
        self.drawn = 0
        self._done = threading.Event()
        self._streams: list[tuple[logging.StreamHandler[Any], IO[str]]] = []

    def render(self) -> list[str]:
        dags = self.board.snapshot()
        width = max((len(p.name) for p in dags), default=4)
        done = sum(1 for p in dags if p.finished)
        return [f"jobdags: {done}/{len(dags)} done", *(_line(p, width) for p in dags)]

    def erase(self) -> None:
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0

    def draw(self) -> None:
        with self.lock:
            self.erase()
            lines = self.render()
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()
            self.drawn = len(lines)

    def _loop(self) -> None:
        while not self._done.wait(1.0):
            self.draw()

    def start(self) -> None:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stderr, sys.stdout):
                self._streams.append((handler, handler.stream))
                handler.setStream(_Above(self, handler.stream))  # type: ignore[arg-type]
        self.draw()
        threading.Thread(target=self._loop, name="progress-live", daemon=True).start()

    def stop(self) -> None:
        self._done.set()
        self.draw()  # the final state stays on screen
        self.drawn = 0
        for handler, stream in self._streams:
            handler.setStream(stream)


class _Above:
    """A log stream that erases the live view, writes, and draws it again."""

    def __init__(self, view: _LiveView, stream: IO[str]) -> None:
        self.view, self.stream = view, stream

    def write(self, text: str) -> int:
        with self.view.lock:
            self.view.erase()
            self.view.out.flush()
            written = self.stream.write(text)
            self.stream.flush()
            if text.endswith("\n"):
                self.view.draw()
            return written

    def flush(self) -> None:
        self.stream.flush()


def table(summary: dict[str, Any]) -> str:
    """The end-of-run table: one row per DAG, and below a DAG with several sinks one row per sink.
    Each sink writes its own branch (valid records, a fork's subset, the errors), so the rows a DAG
    wrote add up across sinks to more than it read: a per-sink count is never summed."""
    head = ("dag", "status", "read", "rejected", "written (per sink)", "seconds", "cost (exec s)")
    rows: list[tuple[str, ...]] = []
    for d in summary.get("dags", []):
        sinks: dict[str, int] = d.get("sinks", {})
        alone = next(iter(sinks.values())) if len(sinks) == 1 else None
        rows.append(
            (
                str(d["name"]),
                str(d["status"]),
                f"{d.get('records_read', 0):,}",
                f"{d.get('records_rejected', 0):,}",
                f"{alone:,} ({next(iter(sinks))})" if alone is not None else "" if sinks else "0",
                f"{d.get('seconds', 0):.1f}",
                f"{d.get('executor_seconds', 0):.1f}",
            )
        )
        if len(sinks) > 1:
            rows += [(f"  {sink}", "", "", "", f"{n:,}", "", "") for sink, n in sinks.items()]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*head), "  ".join("-" * w for w in widths), *(fmt.format(*r).rstrip() for r in rows)]
    return "\n".join(lines)


def hop_table(summary: dict[str, Any]) -> str:
    """The end-of-flow table: one row per hop (its JobStatus)."""
    head = ("hop", "status", "executor", "template", "read", "rejected", "seconds")
    rows = [
        (
            str(h["jobName"]),
            str(h["executionStatus"]),
            str(h.get("executor") or ""),
            str(h.get("template") or ""),
            f"{h.get('processedCount') or 0:,}",
            f"{h.get('errorCount') or 0:,}",
            f"{((h.get('executionEndTime') or 0) - (h.get('executionStartTime') or 0)) / 1000:.1f}",
        )
        for h in summary.get("hops", [])
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 4 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*head), "  ".join("-" * w for w in widths), *(fmt.format(*r).rstrip() for r in rows)]
    return "\n".join(lines)
