"""The metadata store in Delta tables under ``<warehouse>/_engine/``.

``state`` (dataset watermarks, append-only, newest row per key wins), ``job_status`` (one row per
run and dataset), ``flow_status`` (one row per run), ``checkpoint_changes`` (who changed which
watermark, when and why) and ``commit_log`` (the publish protocol's write-ahead log). Every
write is one Delta append; appends never conflict, so jobs share the location. Tables are created
by :meth:`DeltaMetadataStore.ensure` before any concurrency (a concurrent creation is retried).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.state import watermarks
from engine.state.delta_table import MetaTable
from engine.state.store import (
    LIVE,
    SCHEMA_VERSION,
    CheckpointChange,
    DatasetState,
    DatasetStatus,
    FlowState,
    FlowStatusRow,
    JobStatusRow,
    LogRow,
    MetadataStore,
    last_runs,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

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
EPOCH_PROPERTY = "engine.log_epoch"
LOG_DDL = (
    "job STRING, dag STRING, scope STRING, batch BIGINT, kind STRING, run_id STRING, at TIMESTAMP, "
    "body STRING, message STRING"
)
CHANGES_DDL = (
    "job STRING, dag STRING, dataset STRING, action STRING, old STRING, new STRING, reason STRING, "
    "user STRING, changed_at TIMESTAMP"
)


class DeltaMetadataStore(MetadataStore):
    def __init__(self, spark: SparkSession, root: str) -> None:
        root = root.rstrip("/")
        self.state = MetaTable(spark, f"{root}/state", STATE_DDL, version=SCHEMA_VERSION, what="state")
        self.jobs = MetaTable(spark, f"{root}/job_status", JOB_STATUS_DDL, version=SCHEMA_VERSION, what="job status")
        self.flows = MetaTable(
            spark, f"{root}/flow_status", FLOW_STATUS_DDL, version=SCHEMA_VERSION, what="flow status"
        )
        self.changelog = MetaTable(
            spark, f"{root}/checkpoint_changes", CHANGES_DDL, version=SCHEMA_VERSION, what="checkpoint changes"
        )
        self.log = MetaTable(spark, f"{root}/commit_log", LOG_DDL, version=SCHEMA_VERSION, what="commit log")

    def ensure(self) -> DeltaMetadataStore:
        for table in (self.state, self.jobs, self.flows, self.changelog):
            table.ensure()
        self.log.ensure({EPOCH_PROPERTY: uuid.uuid4().hex[:12]})
        return self

    def load_state(self, job: str, dag: str, scope: str = LIVE) -> dict[str, DatasetState]:
        """Read-only: a missing table is an empty state (planning a job that then fails its
        checks leaves nothing behind)."""
        if not _readable(self.state):
            return {}
        mine = (F.col("job") == job) & (F.col("dag") == dag) & (F.col("scope") == scope)
        return {s.dataset: s for s in (_state(r) for r in _latest(self.state.read().where(mine)))}

    def all_state(self, job: str) -> list[DatasetState]:
        if not _readable(self.state):
            return []
        return [_state(r) for r in _latest(self.state.read().where(F.col("job") == job))]

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
        self.jobs.append({**asdict(r), "status": r.status.value} for r in rows)

    def add_flow_status(self, row: FlowStatusRow) -> None:
        self.flows.append([{**asdict(row), "status": row.status.value}])

    def add_change(self, change: CheckpointChange) -> None:
        self.changelog.append([asdict(change)])

    def job_status(self, job: str, *, runs: int = 5) -> list[JobStatusRow]:
        if not _readable(self.jobs):
            return []
        frame = self.jobs.read().where(F.col("job") == job)
        heads = frame.groupBy("run_id").agg(F.min("start_time").alias("s")).collect()
        keep = last_runs([(r["run_id"], r["s"]) for r in heads], runs)
        rows = frame.where(F.col("run_id").isin(keep)).collect() if keep else []
        out = [JobStatusRow(**{**r.asDict(), "status": DatasetStatus(r["status"])}) for r in rows]
        return sorted(out, key=lambda r: (r.start_time, r.dataset), reverse=True)

    def flow_status(self, job: str, *, limit: int = 10) -> list[FlowStatusRow]:
        if not _readable(self.flows):
            return []
        rows = self.flows.read().where(F.col("job") == job).orderBy(F.desc("start_time")).limit(limit).collect()
        return [FlowStatusRow(**{**r.asDict(), "status": FlowState(r["status"])}) for r in rows]

    def changes(self, job: str, *, limit: int = 20) -> list[CheckpointChange]:
        if not _readable(self.changelog):
            return []
        rows = self.changelog.read().where(F.col("job") == job).orderBy(F.desc("changed_at")).limit(limit).collect()
        return [CheckpointChange(**r.asDict()) for r in rows]

    def append_log(self, rows: list[LogRow]) -> None:
        self.log.append(asdict(r) for r in rows)

    def log_epoch(self) -> str:
        """Read from the commit log's properties (whichever job created it drew it)."""
        self.log.check()
        return self.log.properties.get(EPOCH_PROPERTY, "0")

    def read_log(self, job: str) -> list[LogRow]:
        if not _readable(self.log):
            return []
        rows = self.log.read().where(F.col("job") == job).collect()
        return sorted((LogRow(**r.asDict()) for r in rows), key=lambda r: (r.at, r.batch))


def _readable(table: MetaTable) -> bool:
    if not table.exists():
        return False
    table.check()
    return True


def _latest(frame: DataFrame) -> list[Row]:
    """The newest row per ``(job, dag, scope, dataset)``, computed by Spark (the table only grows)."""
    key = Window.partitionBy("job", "dag", "scope", "dataset").orderBy(F.desc("committed_at"), F.desc("run_id"))
    return frame.withColumn("_n", F.row_number().over(key)).where("_n = 1").drop("_n").collect()


def _state(row: Row) -> DatasetState:
    data: dict[str, Any] = row.asDict()
    data.pop("watermark_kind", None)
    data["watermark"] = watermarks.parse(data["watermark"])
    return DatasetState(**data)
