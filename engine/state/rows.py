"""The rows of the metadata tables, as frozen values: a dataset's state, its status in a run,
a run's flow status, checkpoint changes, the commit log, the file log and pinned schemas.

State rows are append-only and keyed by ``(job, dag, scope, dataset)``; the newest row of a key
(by ``committed_at``) is the dataset's state. ``scope`` is ``live`` for scheduled runs and
``backfill:<from>..<to>`` for a bounded backfill, whose bookkeeping never touches the live one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from engine.state.status import Status
from engine.state.watermarks import Watermark

SCHEMA_VERSION = 1
LIVE = "live"


def backfill_scope(start: str | None, end: str | None) -> str:
    return f"backfill:{start or ''}..{end or ''}"


@dataclass(frozen=True)
class DatasetState:
    job: str
    dag: str
    scope: str
    dataset: str
    watermark: Watermark | None
    run_id: str
    committed_at: datetime
    note: str = ""
    """Why the row was written: ``run``, or the checkpoint action that wrote it."""


@dataclass(frozen=True)
class JobStatusRow:
    """One dataset in one run (Gobblin's JobStatus)."""

    run_id: str
    job: str
    dag: str
    scope: str
    dataset: str
    status: Status
    message: str
    records: int
    bytes: int
    executor_seconds: float
    low: str | None
    high: str | None
    start_time: datetime
    end_time: datetime


@dataclass(frozen=True)
class FlowStatusRow:
    """One run of a job (Gobblin's FlowStatus)."""

    run_id: str
    job: str
    status: Status
    message: str
    datasets: int
    committed: int
    failed: int
    records: int
    start_time: datetime
    end_time: datetime


@dataclass(frozen=True)
class CheckpointChange:
    job: str
    dag: str
    dataset: str
    action: str
    old: str | None
    new: str | None
    reason: str
    user: str
    changed_at: datetime


@dataclass(frozen=True)
class LogRow:
    """One entry of the commit log (the publish protocol's write-ahead log, see
    :mod:`engine.commit.log`): a batch's ``plan``, its ``sequence`` of commit steps, a failed
    ``attempt``, ``done``, or an operator's ``released``/``abandoned``."""

    job: str
    dag: str
    scope: str
    batch: int
    kind: str
    run_id: str
    at: datetime
    body: str = ""
    """JSON: the plan's work units, the sequence's steps."""
    message: str = ""


@dataclass(frozen=True)
class FileRead:
    """One file of a dataset in the file log: read by a committed batch (or skipped on purpose,
    with a ``note`` saying why). A file counts as read while its path, modification time and size
    are those logged; rewritten in place, it is a new file."""

    job: str
    dag: str
    scope: str
    dataset: str
    path: str
    mtime_ms: int
    size: int
    batch: int
    run_id: str
    read_at: datetime
    note: str = ""

    @property
    def key(self) -> FileKey:
        return (self.path, self.mtime_ms, self.size)


FileKey = tuple[str, int, int]
"""A file as the file log knows it: (path, modification time in ms, size)."""


@dataclass(frozen=True)
class PinnedSchema:
    """A DAG's source schema inferred from its first files, kept so later runs read with the
    same types (a source that declares none would otherwise infer anew from each run's files)."""

    job: str
    dag: str
    fingerprint: str
    """What the inference depended on (format, reader options): another one infers again."""
    ddl: str
    run_id: str
    pinned_at: datetime


def last_runs(runs: list[tuple[str, datetime]], n: int) -> list[str]:
    """The ids of the ``n`` newest runs among ``(run_id, start)`` pairs."""
    first_seen: dict[str, datetime] = {}
    for run_id, start in runs:
        first_seen[run_id] = min(start, first_seen.get(run_id, start))
    return [r for r, _ in sorted(first_seen.items(), key=lambda kv: kv[1], reverse=True)[:n]]


def utcnow() -> datetime:
    """Naive UTC, microseconds: how every time in the metadata tables is kept."""
    return datetime.now(timezone.utc).replace(tzinfo=None)
