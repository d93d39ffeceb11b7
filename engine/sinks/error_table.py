"""The error table: every rejected record with its original payload and reasons (Delta), staged
and published like a Delta sink (its own ``txnAppId``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
from engine.commit.steps import DeltaWrite
from engine.state.delta_table import MetaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.commit.fs import HadoopFs

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

    def stage(self, rows: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        staging = batch.staging(self.path)
        rows.write.mode("overwrite").parquet(staging)
        step = DeltaWrite(
            sink="errors",
            table=self.path,
            staging=staging,
            mode="append",
            app_id=f"{batch.app_id}:_errors",
            batch=batch.number,
            base_version=fs.delta_version(self.path),
            user_metadata=batch.user_metadata,
        )
        return Staged([step], staging)

    def append(self, rows: DataFrame) -> None:
        rows.write.format("delta").mode("append").save(self.path)
