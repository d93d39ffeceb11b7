"""The error table: every rejected record with its original payload and reasons (Delta)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.state.delta_table import MetaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ERROR_TABLE_DDL = (
    "job STRING, dag STRING, run_id STRING, source STRING, step STRING, reasons ARRAY<STRING>, "
    "record STRING, error_time TIMESTAMP"
)
SCHEMA_VERSION = 1


class ErrorTable:
    """One job's error table. :meth:`ensure` creates it before DAGs write to it concurrently
    (concurrent first writes to an empty Delta directory conflict)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def ensure(self, spark: SparkSession) -> None:
        MetaTable(spark, self.path, ERROR_TABLE_DDL, version=SCHEMA_VERSION, what="error").ensure()

    def append(self, rows: DataFrame) -> None:
        rows.write.format("delta").mode("append").save(self.path)
