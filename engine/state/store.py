"""The metadata stores, split by noun: :class:`StateStore` (dataset state, checkpoint changes,
the file log, pinned schemas), :class:`StatusStore` (JobStatus and FlowStatus rows; the runs
table is :class:`~engine.state.runs.RunStore`) and :class:`CommitLogStore` (the publish protocol's
write-ahead log). Callers depend on the one they need; :class:`MetadataStore` is all three, as
:class:`InMemoryMetadataStore` (here) and the Delta store (:mod:`engine.state.delta_store`) are:
the tables live side by side under ``<warehouse>/_engine/``.

The rows are in :mod:`engine.state.rows` (re-exported here, where callers have always found them).
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod

from engine.state.rows import (
    LIVE,
    SCHEMA_VERSION,
    CheckpointChange,
    DatasetState,
    FileKey,
    FileRead,
    FlowStatusRow,
    JobStatusRow,
    LogRow,
    PinnedSchema,
    backfill_scope,
    last_runs,
    utcnow,
)

__all__ = [
    "LIVE",
    "SCHEMA_VERSION",
    "CheckpointChange",
    "CommitLogStore",
    "DatasetState",
    "FileKey",
    "FileRead",
    "FlowStatusRow",
    "InMemoryMetadataStore",
    "JobStatusRow",
    "LogRow",
    "MetadataStore",
    "PinnedSchema",
    "StateStore",
    "StatusStore",
    "backfill_scope",
    "last_runs",
    "utcnow",
]


class _Located:
    """Every store names its tables' places in messages."""

    def location(self, table: str) -> str:
        """Where metadata table ``table`` (``state``, ``commit_log``, ...) lives, for messages."""
        return f"_engine/{table}"


class StateStore(_Located, ABC):
    """What the datasets have read: their watermarks (with who changed them by hand), the files
    each read, and the schemas pinned for sources that infer theirs."""

    @abstractmethod
    def load_state(self, job: str, dag: str, scope: str = LIVE) -> dict[str, DatasetState]:
        """The newest state of every dataset of ``(job, dag, scope)``, by dataset URN."""

    @abstractmethod
    def save_state(self, rows: list[DatasetState]) -> None:
        """Append ``rows`` in one commit (all or nothing)."""

    @abstractmethod
    def all_state(self, job: str) -> list[DatasetState]:
        """The newest state of every ``(dag, scope, dataset)`` of ``job``."""

    @abstractmethod
    def add_change(self, change: CheckpointChange) -> None: ...

    @abstractmethod
    def changes(self, job: str, *, limit: int = 20) -> list[CheckpointChange]: ...

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
    def file_batches(self, job: str, dag: str, scope: str = LIVE) -> dict[int, int]:
        """How many files each batch of ``(job, dag, scope)`` logged, by batch number."""

    @abstractmethod
    def pinned_schema(self, job: str, dag: str) -> PinnedSchema | None:
        """The newest schema pinned for ``(job, dag)``'s source, if any."""

    @abstractmethod
    def pin_schema(self, row: PinnedSchema) -> None:
        """Keep ``row`` as ``(job, dag)``'s source schema (the newest pin wins)."""

    def chain_checked(self, job: str, dag: str) -> str | None:
        """The key of the newest check of ``(job, dag)``'s converter chain that passed
        (:mod:`engine.runtime.chain_check_key`), if this store keeps it."""
        return None

    def chain_passed(self, job: str, dag: str, key: str) -> None:
        """Keep ``key`` as ``(job, dag)``'s newest passed check: a cache, which a store may drop."""


class StatusStore(_Located, ABC):
    """How each run went: one JobStatus row per dataset and run, one FlowStatus row per run."""

    @abstractmethod
    def add_job_status(self, rows: list[JobStatusRow]) -> None: ...

    @abstractmethod
    def add_flow_status(self, row: FlowStatusRow) -> None: ...

    @abstractmethod
    def job_status(self, job: str, *, runs: int = 5) -> list[JobStatusRow]:
        """The dataset rows of the last ``runs`` runs of ``job``, newest first."""

    @abstractmethod
    def flow_status(self, job: str, *, limit: int = 10) -> list[FlowStatusRow]: ...


class CommitLogStore(_Located, ABC):
    """Where :class:`~engine.commit.log.CommitLog` keeps its rows."""

    @abstractmethod
    def append_log(self, rows: list[LogRow]) -> None:
        """Append commit-log rows in one commit."""

    @abstractmethod
    def read_log(self, job: str) -> list[LogRow]:
        """Every commit-log row of ``job``, oldest first."""

    @abstractmethod
    def log_epoch(self) -> str:
        """A random id drawn when the commit log was created. Delta sinks' ``txnAppId`` carries
        it: batch numbers restart with a new log, and must not collide with an old log's."""


class MetadataStore(StateStore, StatusStore, CommitLogStore):
    """Every metadata table of a warehouse: what a run is given, to hand each part the store it
    needs."""


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
        self.checks: dict[tuple[str, str], str] = {}
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

    def chain_checked(self, job: str, dag: str) -> str | None:
        return self.checks.get((job, dag))

    def chain_passed(self, job: str, dag: str, key: str) -> None:
        self.checks[(job, dag)] = key

    def file_batches(self, job: str, dag: str, scope: str = LIVE) -> dict[int, int]:
        out: dict[int, int] = {}
        for f in self.files:
            if (f.job, f.dag, f.scope) == (job, dag, scope):
                out[f.batch] = out.get(f.batch, 0) + 1
        return out

    def log_epoch(self) -> str:
        return self.epoch
