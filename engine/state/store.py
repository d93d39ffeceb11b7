"""Per-dataset state, job and flow status, and checkpoint changes: the metadata store contract
with an in-memory twin. :mod:`engine.state.delta_store` keeps the same in Delta tables.

State rows are append-only and keyed by ``(job, dag, scope, dataset)``; the newest row of a key
(by ``committed_at``) is the dataset's state. ``scope`` is ``live`` for scheduled runs and
``backfill:<from>..<to>`` for a bounded backfill, whose bookkeeping never touches the live one.
"""

from __future__ import annotations

import enum
import threading
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone

from engine.state.watermarks import Watermark

SCHEMA_VERSION = 1
LIVE = "live"


def backfill_scope(start: str | None, end: str | None) -> str:
    return f"backfill:{start or ''}..{end or ''}"


class DatasetStatus(str, enum.Enum):
    COMMITTED = "COMMITTED"
    """Read, written and its watermark advanced."""
    EMPTY = "EMPTY"
    """Nothing new (or throttled out this run): the watermark is carried forward unchanged."""
    FAILED = "FAILED"
    """This dataset failed: its watermark stays at the low watermark."""
    ROLLED_BACK = "ROLLED_BACK"
    """Read fine, but the run did not commit (``policy = full`` and another dataset failed)."""
    QUARANTINED = "QUARANTINED"
    """Its DAG's last batch could not be published after ``publish.max_attempts`` tries: the DAG
    is skipped until an operator releases or abandons the batch (``mode=commit``)."""
    CANCELLED = "CANCELLED"
    """The run was stopped (SIGTERM/SIGINT) before this dataset was published: nothing of it is
    visible and its watermark stays; the next run reads it again."""
    SKIPPED = "SKIPPED"
    """Not run: a DAG it runs ``after`` did not succeed."""


class FlowState(str, enum.Enum):
    SUCCEEDED = "SUCCEEDED"
    PARTIAL = "PARTIAL"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


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
    status: DatasetStatus
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
    status: FlowState
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


class MetadataStore(ABC):
    """Where dataset state, status and the commit log live."""

    @abstractmethod
    def load_state(self, job: str, dag: str, scope: str = LIVE) -> dict[str, DatasetState]:
        """The newest state of every dataset of ``(job, dag, scope)``, by dataset URN."""

    @abstractmethod
    def save_state(self, rows: list[DatasetState]) -> None:
        """Append ``rows`` in one commit (all or nothing)."""

    @abstractmethod
    def add_job_status(self, rows: list[JobStatusRow]) -> None: ...

    @abstractmethod
    def add_flow_status(self, row: FlowStatusRow) -> None: ...

    @abstractmethod
    def add_change(self, change: CheckpointChange) -> None: ...

    @abstractmethod
    def job_status(self, job: str, *, runs: int = 5) -> list[JobStatusRow]:
        """The dataset rows of the last ``runs`` runs of ``job``, newest first."""

    @abstractmethod
    def flow_status(self, job: str, *, limit: int = 10) -> list[FlowStatusRow]: ...

    @abstractmethod
    def changes(self, job: str, *, limit: int = 20) -> list[CheckpointChange]: ...

    @abstractmethod
    def all_state(self, job: str) -> list[DatasetState]:
        """The newest state of every ``(dag, scope, dataset)`` of ``job``."""

    @abstractmethod
    def append_log(self, rows: list[LogRow]) -> None:
        """Append commit-log rows in one commit."""

    @abstractmethod
    def read_log(self, job: str) -> list[LogRow]:
        """Every commit-log row of ``job``, oldest first."""

    @abstractmethod
    def log_files(self, rows: list[FileRead]) -> None:
        """Append to the file log in one commit."""

    @abstractmethod
    def files_read(self, job: str, dag: str, scope: str = LIVE) -> dict[str, set[FileKey]]:
        """Every file each dataset of ``(job, dag, scope)`` has logged, by dataset URN."""

    @abstractmethod
    def files_logged(self, job: str, dag: str, scope: str, batch: int) -> bool:
        """Whether batch ``batch`` of ``(job, dag, scope)`` has logged its files."""

    @abstractmethod
    def pinned_schema(self, job: str, dag: str) -> PinnedSchema | None:
        """The newest schema pinned for ``(job, dag)``'s source, if any."""

    @abstractmethod
    def pin_schema(self, row: PinnedSchema) -> None:
        """Keep ``row`` as ``(job, dag)``'s source schema (the newest pin wins)."""

    @abstractmethod
    def file_batches(self, job: str, dag: str, scope: str = LIVE) -> dict[int, int]:
        """How many files each batch of ``(job, dag, scope)`` logged, by batch number."""

    @abstractmethod
    def log_epoch(self) -> str:
        """A random id drawn when the commit log was created. Delta sinks' ``txnAppId`` carries
        it: batch numbers restart with a new log, and must not collide with an old log's."""

    def location(self, table: str) -> str:
        """Where metadata table ``table`` (``state``, ``commit_log``, ...) lives, for messages."""
        return f"_engine/{table}"


class InMemoryMetadataStore(MetadataStore):
    """For fast tests: the same contract, no Spark."""

    def __init__(self) -> None:
        self.states: list[DatasetState] = []
        self.jobs: list[JobStatusRow] = []
        self.flows: list[FlowStatusRow] = []
        self.changelog: list[CheckpointChange] = []
        self.log: list[LogRow] = []
        self.files: list[FileRead] = []
        self.pins: list[PinnedSchema] = []
        self.epoch = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()

    def load_state(self, job: str, dag: str, scope: str = LIVE) -> dict[str, DatasetState]:
        return {s.dataset: s for s in self.all_state(job) if s.dag == dag and s.scope == scope}

    def save_state(self, rows: list[DatasetState]) -> None:
        with self._lock:
            self.states.extend(rows)

    def add_job_status(self, rows: list[JobStatusRow]) -> None:
        with self._lock:
            self.jobs.extend(rows)

    def add_flow_status(self, row: FlowStatusRow) -> None:
        with self._lock:
            self.flows.append(row)

    def add_change(self, change: CheckpointChange) -> None:
        with self._lock:
            self.changelog.append(change)

    def job_status(self, job: str, *, runs: int = 5) -> list[JobStatusRow]:
        rows = [r for r in self.jobs if r.job == job]
        keep = set(last_runs([(r.run_id, r.start_time) for r in rows], runs))
        return sorted((r for r in rows if r.run_id in keep), key=lambda r: (r.start_time, r.dataset), reverse=True)

    def flow_status(self, job: str, *, limit: int = 10) -> list[FlowStatusRow]:
        return sorted((r for r in self.flows if r.job == job), key=lambda r: r.start_time, reverse=True)[:limit]

    def changes(self, job: str, *, limit: int = 20) -> list[CheckpointChange]:
        return sorted((c for c in self.changelog if c.job == job), key=lambda c: c.changed_at, reverse=True)[:limit]

    def all_state(self, job: str) -> list[DatasetState]:
        latest: dict[tuple[str, str, str], DatasetState] = {}
        for row in sorted((s for s in self.states if s.job == job), key=lambda s: s.committed_at):
            latest[(row.dag, row.scope, row.dataset)] = row
        return list(latest.values())

    def append_log(self, rows: list[LogRow]) -> None:
        with self._lock:
            self.log.extend(rows)

    def read_log(self, job: str) -> list[LogRow]:
        return [r for r in self.log if r.job == job]

    def log_files(self, rows: list[FileRead]) -> None:
        with self._lock:
            self.files.extend(rows)

    def files_read(self, job: str, dag: str, scope: str = LIVE) -> dict[str, set[FileKey]]:
        out: dict[str, set[FileKey]] = {}
        for f in self.files:
            if (f.job, f.dag, f.scope) == (job, dag, scope):
                out.setdefault(f.dataset, set()).add(f.key)
        return out

    def files_logged(self, job: str, dag: str, scope: str, batch: int) -> bool:
        return any((f.job, f.dag, f.scope, f.batch) == (job, dag, scope, batch) for f in self.files)

    def pinned_schema(self, job: str, dag: str) -> PinnedSchema | None:
        mine = [p for p in self.pins if (p.job, p.dag) == (job, dag)]
        return max(mine, key=lambda p: p.pinned_at) if mine else None

    def pin_schema(self, row: PinnedSchema) -> None:
        with self._lock:
            self.pins.append(row)

    def file_batches(self, job: str, dag: str, scope: str = LIVE) -> dict[int, int]:
        out: dict[int, int] = {}
        for f in self.files:
            if (f.job, f.dag, f.scope) == (job, dag, scope):
                out[f.batch] = out.get(f.batch, 0) + 1
        return out

    def log_epoch(self) -> str:
        return self.epoch


def last_runs(runs: list[tuple[str, datetime]], n: int) -> list[str]:
    """The ids of the ``n`` newest runs among ``(run_id, start)`` pairs."""
    first_seen: dict[str, datetime] = {}
    for run_id, start in runs:
        first_seen[run_id] = min(start, first_seen.get(run_id, start))
    return [r for r, _ in sorted(first_seen.items(), key=lambda kv: kv[1], reverse=True)[:n]]


def utcnow() -> datetime:
    """Naive UTC, microseconds: how every time in the metadata tables is kept."""
    return datetime.now(timezone.utc).replace(tzinfo=None)
