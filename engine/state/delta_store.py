"""The metadata store in Delta tables under ``<warehouse>/_engine/``.

``state`` (dataset watermarks, append-only, newest row per key wins), ``job_status`` (one row per
run and dataset), ``flow_status`` (one row per run), ``checkpoint_changes`` (who changed which
watermark, when and why), ``files_read`` (the file log: every file a dataset read) and
``commit_log`` (the publish protocol's write-ahead log). Every
write is one Delta append; appends never conflict, so jobs share the location. Tables are created
by :meth:`DeltaMetadataStore.ensure` before any concurrency (a concurrent creation is retried).
Beside the tables, ``checks/<job>/<dag>`` caches the key of each DAG's last passed chain check
(a local warehouse only; elsewhere every run checks).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from engine.state import watermarks
from engine.state.backends import AUTO
from engine.state.delta_table import MetaTable, prefetch
from engine.state.delta_table import meta_table as open_table
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
    last_runs,
)
from engine.state.status import Status
from engine.state.store import MetadataStore
from engine.storage.options import local_path

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATE_DDL = (
    "job STRING, dag STRING, scope STRING, dataset STRING, watermark STRING, watermark_kind STRING, "
    "run_id STRING, committed_at TIMESTAMP, note STRING"
)
JOB_STATUS_DDL = (
    "run_id STRING, job STRING, dag STRING, scope STRING, dataset STRING, status STRING, message STRING, "
    "records BIGINT, bytes BIGINT, executor_seconds DOUBLE, low STRING, high STRING, "
    "start_time TIMESTAMP, end_time TIMESTAMP"
)
FLOW_STATUS_DDL = (
    "run_id STRING, job STRING, status STRING, message STRING, datasets INT, committed INT, failed INT, "
    "records BIGINT, start_time TIMESTAMP, end_time TIMESTAMP"
)
FLOW_EXECUTIONS_DDL = (
    "flow_group STRING, flow_name STRING, execution_id STRING, status STRING, message STRING, "
    "start_time TIMESTAMP, end_time TIMESTAMP, job_statuses STRING"
)
"""One row per execution of a flow (the seed's FlowStatus); ``job_statuses`` is the JSON list of
its hops' JobStatus."""
EPOCH_PROPERTY = "engine.log_epoch"
LOG_DDL = (
    "job STRING, dag STRING, scope STRING, batch BIGINT, kind STRING, run_id STRING, at TIMESTAMP, "
    "body STRING, message STRING"
)
FILES_DDL = (
    "job STRING, dag STRING, scope STRING, dataset STRING, path STRING, mtime_ms BIGINT, size BIGINT, "
    "batch BIGINT, run_id STRING, read_at TIMESTAMP, note STRING"
)
SCHEMAS_DDL = "job STRING, dag STRING, fingerprint STRING, ddl STRING, run_id STRING, pinned_at TIMESTAMP"
CHANGES_DDL = (
    "job STRING, dag STRING, dataset STRING, action STRING, old STRING, new STRING, reason STRING, "
    "user STRING, changed_at TIMESTAMP"
)


class DeltaMetadataStore(MetadataStore):
    """Every narrow store (state, status, commit log) over its own tables under one root."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        *,
        mask: Callable[[str], str] = lambda text: text,
        backend: str = AUTO,
        options: Mapping[str, str] | None = None,
    ) -> None:
        """``mask`` hides what must not be stored in a message (the secrets a run decrypted);
        ``backend`` is how the tables are reached (:data:`~engine.state.delta_table.BACKENDS`),
        ``options`` delta-rs's storage options for ``root`` on an object store."""
        self.mask = mask
        root = root.rstrip("/")

        def meta_table(path: str, ddl: str, *, version: int, what: str) -> MetaTable:
            return open_table(spark, path, ddl, version=version, what=what, backend=backend, options=options)

        local = local_path(root)
        self.checks = os.path.join(local, "checks") if local is not None else None
        self.state = meta_table(f"{root}/state", STATE_DDL, version=SCHEMA_VERSION, what="state")
        self.jobs = meta_table(f"{root}/job_status", JOB_STATUS_DDL, version=SCHEMA_VERSION, what="job status")
        self.flows = meta_table(f"{root}/flow_status", FLOW_STATUS_DDL, version=SCHEMA_VERSION, what="flow status")
        self.changelog = meta_table(
            f"{root}/checkpoint_changes", CHANGES_DDL, version=SCHEMA_VERSION, what="checkpoint changes"
        )
        self.log = meta_table(f"{root}/commit_log", LOG_DDL, version=SCHEMA_VERSION, what="commit log")
        self.files = meta_table(f"{root}/files_read", FILES_DDL, version=SCHEMA_VERSION, what="file log")
        self.schemas = meta_table(f"{root}/schemas", SCHEMAS_DDL, version=SCHEMA_VERSION, what="schemas")
        self.flow_runs = meta_table(
            f"{root}/flow_executions", FLOW_EXECUTIONS_DDL, version=SCHEMA_VERSION, what="flow executions"
        )
        prefetch([self.log, self.state, self.jobs, self.flows, self.changelog, self.files])

    def ensure(self) -> DeltaMetadataStore:
        """Create the tables a run needs; the file log (created by the first batch that logs files)
        is only opened, so a damaged one is refused now rather than in the middle of a publish."""
        for table in (self.state, self.jobs, self.flows, self.changelog):
            table.ensure()
        self.log.ensure({EPOCH_PROPERTY: uuid.uuid4().hex[:12]})
        if self.files.exists():
            self.files.check()
        return self

    def location(self, table: str) -> str:
        return str(getattr(self, _TABLES[table]).path)

    def load_state(self, job: str, dag: str, scope: str = LIVE) -> dict[str, DatasetState]:
        """Read-only: a missing table is an empty state (planning a job that then fails its
        checks leaves nothing behind)."""
        if not _readable(self.state):
            return {}
        mine = self.state.rows(job=job, dag=dag, scope=scope)
        return {s.dataset: s for s in (_state(r) for r in _latest(mine))}

    def all_state(self, job: str) -> list[DatasetState]:
        if not _readable(self.state):
            return []
        return [_state(r) for r in _latest(self.state.rows(job=job))]

    def save_state(self, rows: list[DatasetState]) -> None:
        self.state.append(
            {
                **{k: v for k, v in asdict(r).items() if k != "watermark"},
                "watermark": r.watermark.to_json() if r.watermark else None,
                "watermark_kind": r.watermark.kind if r.watermark else None,
            }
            for r in rows
        )

    def add_job_status(self, rows: list[JobStatusRow]) -> None:
        self.jobs.append({**asdict(r), "status": r.status.value, "message": self.mask(r.message)} for r in rows)

    def add_flow_status(self, row: FlowStatusRow) -> None:
        self.flows.append([{**asdict(row), "status": row.status.value, "message": self.mask(row.message)}])

    def add_change(self, change: CheckpointChange) -> None:
        self.changelog.append([asdict(change)])

    def job_status(self, job: str, *, runs: int = 5) -> list[JobStatusRow]:
        if not _readable(self.jobs):
            return []
        found = self.jobs.rows(job=job)
        keep = set(last_runs([(r["run_id"], r["start_time"]) for r in found], runs))
        out = [JobStatusRow(**{**r, "status": Status(r["status"])}) for r in found if r["run_id"] in keep]
        return sorted(out, key=lambda r: (r.start_time, r.dataset), reverse=True)

    def flow_status(self, job: str, *, limit: int = 10) -> list[FlowStatusRow]:
        if not _readable(self.flows):
            return []
        rows = sorted(self.flows.rows(job=job), key=lambda r: r["start_time"], reverse=True)[:limit]
        return [FlowStatusRow(**{**r, "status": Status(r["status"])}) for r in rows]

    def add_flow_execution(self, row: dict[str, Any]) -> None:
        """Created by a flow's first execution (jobs never pay for it)."""
        self.flow_runs.ensure()
        masked = {k: self.mask(str(row.get(k) or "")) for k in ("message", "job_statuses")}
        self.flow_runs.append([{**row, **masked}])

    def flow_executions(self, group: str, name: str, *, limit: int = 10) -> list[dict[str, Any]]:
        """The flow's last executions, newest first (a running one has no end time yet)."""
        if not _readable(self.flow_runs):
            return []
        rows = self.flow_runs.rows(flow_group=group, flow_name=name)
        latest: dict[str, dict[str, Any]] = {}
        for row in sorted(rows, key=lambda r: (r["start_time"], r["end_time"] is not None)):
            latest[row["execution_id"]] = row  # the end row of an execution replaces its start row
        return sorted(latest.values(), key=lambda r: r["start_time"], reverse=True)[:limit]

    def changes(self, job: str, *, limit: int = 20) -> list[CheckpointChange]:
        if not _readable(self.changelog):
            return []
        rows = sorted(self.changelog.rows(job=job), key=lambda r: r["changed_at"], reverse=True)[:limit]
        return [CheckpointChange(**r) for r in rows]

    def append_log(self, rows: list[LogRow]) -> None:
        self.log.append({**asdict(r), "message": self.mask(r.message)} for r in rows)

    def log_files(self, rows: list[FileRead]) -> None:
        """Created by the first batch that logs files (jobs without a files source never pay for it)."""
        self.files.ensure()
        self.files.append(asdict(r) for r in rows)

    def files_read(self, job: str, dag: str, scope: str = LIVE) -> dict[str, set[FileKey]]:
        """Read-only, only the columns that identify a file (a landing folder's log holds a row per
        file ever read)."""
        if not _readable(self.files):
            return {}
        out: dict[str, set[FileKey]] = {}
        columns = self.files.columns(["dataset", "path", "mtime_ms", "size"], job=job, dag=dag, scope=scope)
        for dataset, path, mtime, size in zip(*columns, strict=True):
            out.setdefault(dataset, set()).add((path, mtime, size))
        return out

    def files_logged(self, job: str, dag: str, scope: str, batch: int) -> bool:
        if not _readable(self.files):
            return False
        (found,) = self.files.columns(["batch"], job=job, dag=dag, scope=scope, batch=batch)
        return bool(found)

    def pinned_schema(self, job: str, dag: str) -> PinnedSchema | None:
        if not _readable(self.schemas):
            return None
        rows = self.schemas.rows(job=job, dag=dag)
        return PinnedSchema(**max(rows, key=lambda r: r["pinned_at"])) if rows else None

    def pin_schema(self, row: PinnedSchema) -> None:
        """Created by the first source that pins a schema (declared schemas never pay for it)."""
        self.schemas.ensure()
        self.schemas.append([asdict(row)])

    def chain_checked(self, job: str, dag: str) -> str | None:
        if self.checks is None:
            return None
        try:
            with open(self._check_file(job, dag), encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None

    def chain_passed(self, job: str, dag: str, key: str) -> None:
        """Written whole (a temporary file renamed); a failure only costs the next run a check."""
        if self.checks is None:
            return
        path = self._check_file(job, dag)
        temp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temp, "w", encoding="utf-8") as f:
                f.write(key)
            os.replace(temp, path)
        except OSError as exc:
            log.debug("cannot keep the chain check of %s/%s: %s", job, dag, exc)

    def _check_file(self, job: str, dag: str) -> str:
        assert self.checks is not None
        return os.path.join(self.checks, quote(job, safe=""), quote(dag, safe=""))

    def file_batches(self, job: str, dag: str, scope: str = LIVE) -> dict[int, int]:
        if not _readable(self.files):
            return {}
        (batches,) = self.files.columns(["batch"], job=job, dag=dag, scope=scope)
        return dict(Counter(batches))

    def log_epoch(self) -> str:
        """Read from the commit log's properties (whichever job created it drew it)."""
        self.log.check()
        return self.log.properties.get(EPOCH_PROPERTY, "0")

    def read_log(self, job: str) -> list[LogRow]:
        if not _readable(self.log):
            return []
        return sorted((LogRow(**r) for r in self.log.rows(job=job)), key=lambda r: (r.at, r.batch))


_TABLES = {
    "state": "state",
    "job_status": "jobs",
    "flow_status": "flows",
    "checkpoint_changes": "changelog",
    "commit_log": "log",
    "files_read": "files",
}


def _readable(table: MetaTable) -> bool:
    if not table.exists():
        return False
    table.check()
    return True


def _latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest row per ``(job, dag, scope, dataset)`` (by commit time, then run id; the table
    only grows)."""
    newest: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["committed_at"], r["run_id"] or "")):
        newest[(row["job"], row["dag"], row["scope"], row["dataset"])] = row
    return list(newest.values())


def _state(row: dict[str, Any]) -> DatasetState:
    data = dict(row)
    data.pop("watermark_kind", None)
    data["watermark"] = watermarks.parse(data["watermark"])
    return DatasetState(**data)
