"""The error table: every rejected record with its original payload and reasons (Delta)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql.types import StructType

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
        schema = StructType.fromDDL(ERROR_TABLE_DDL)
        assert isinstance(schema, StructType)
        (
            DeltaTable.createIfNotExists(spark)
            .location(self.path)
            .addColumns(schema)
            .property("engine.schema_version", str(SCHEMA_VERSION))
            .execute()
        )

    def append(self, rows: DataFrame) -> None:
        rows.write.format("delta").mode("append").save(self.path)
