"""The runs table in Delta, under ``<warehouse>/_engine/runs``."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from engine.state.delta_table import meta_table
from engine.state.runs import SCHEMA_VERSION, RunRecord, RunStatus, RunStore, latest_per_dag

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DDL = (
    "run_id STRING, job STRING, dag STRING, status STRING, start_time TIMESTAMP, end_time TIMESTAMP, "
    "message STRING, records_read BIGINT, records_written BIGINT, records_rejected BIGINT, "
    "schema_version INT"
)


class DeltaRunStore(RunStore):
    """Create the table if missing (before any concurrency) and refuse a newer schema version."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        self.table = meta_table(spark, path, _DDL, version=SCHEMA_VERSION, what="runs").ensure()

    def append(self, record: RunRecord) -> None:
        self.table.append([{**asdict(record), "status": record.status.value, "schema_version": SCHEMA_VERSION}])

    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        names = [f.name for f in fields(RunRecord)]
        rows = self.table.rows(job=job)
        records = [RunRecord(**{**{n: r[n] for n in names}, "status": RunStatus(r["status"])}) for r in rows]
        records.sort(key=lambda r: (r.end_time is not None, r.end_time or r.start_time))
        return latest_per_dag(records)[:limit]
