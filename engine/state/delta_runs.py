"""The runs table in Delta, under ``<warehouse>/_engine/runs``."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from engine.errors import ConfigError
from engine.state.runs import SCHEMA_VERSION, RunRecord, RunStatus, RunStore, latest_per_dag

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DDL = (
    "run_id STRING, job STRING, dag STRING, status STRING, start_time TIMESTAMP, end_time TIMESTAMP, "
    "message STRING, records_read BIGINT, records_written BIGINT, records_rejected BIGINT, "
    "schema_version INT"
)
_VERSION_PROPERTY = "engine.schema_version"


def _schema() -> StructType:
    schema = StructType.fromDDL(_DDL)
    assert isinstance(schema, StructType)
    return schema


class DeltaRunStore(RunStore):
    """Create the table if missing (before any concurrency) and refuse a newer schema version."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        table = (
            DeltaTable.createIfNotExists(spark)
            .location(path)
            .addColumns(_schema())
            .property(_VERSION_PROPERTY, str(SCHEMA_VERSION))
            .execute()
        )
        found = table.detail().first()
        version = int((found["properties"] or {}).get(_VERSION_PROPERTY, SCHEMA_VERSION)) if found else SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"the runs table was written by a newer engine (schema version {version} > {SCHEMA_VERSION})",
                file=path,
            )

    def append(self, record: RunRecord) -> None:
        row = {**asdict(record), "status": record.status.value, "schema_version": SCHEMA_VERSION}
        schema = _schema()
        df = self.spark.createDataFrame([tuple(row[f.name] for f in schema.fields)], schema=schema)
        df.write.format("delta").mode("append").save(self.path)

    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        names = [f.name for f in fields(RunRecord)]
        rows = self.spark.read.format("delta").load(self.path).where(F.col("job") == job).select(*names).collect()
        records = [RunRecord(**{**r.asDict(), "status": RunStatus(r["status"])}) for r in rows]
        records.sort(key=lambda r: (r.end_time is not None, r.end_time or r.start_time))
        return latest_per_dag(records)[:limit]
