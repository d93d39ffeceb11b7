"""The error table: every rejected record with its original payload and reasons (Delta), staged
and published like a Delta sink (its own ``txnAppId``).

It is safe to read a range again (``mode=checkpoint`` reset or rewind, an abandoned batch): each
row carries a ``record_id``, a digest of where the record was rejected (job, DAG, source, dataset,
file) and what (the record, its reasons), numbered among identical ones of a batch. A batch is
staged without the ids the table already holds, so a record rejected again from the same place is
not added twice. That anti-join at staging is enough for exactly-once: only the DAG that rejected
a record can produce its id, a DAG stages a new batch only once its earlier one is published or
abandoned, and its run holds the job's lease; the published write is still one plain Delta append
under the batch's ``txnAppId`` (no merge, which would conflict with the other DAGs' appends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.columns import ORIGIN as ORIGIN
from engine.columns import RECORD_BYTES as RECORD_BYTES
from engine.columns import RECORD_ID as RECORD_ID
from engine.commit.batch import BatchRef, Staged
from engine.commit.delta_files import read_kept
from engine.sinks.delta import stage_delta
from engine.state.backends import AUTO
from engine.state.delta_create import VERSION_PROPERTY
from engine.state.delta_table import meta_table, never_written, retry_conflicts

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame, SparkSession

    from engine.storage.hadoop import HadoopFs

ERROR_TABLE_DDL = (
    "job STRING, dag STRING, run_id STRING, source STRING, step STRING, reasons ARRAY<STRING>, "
    f"record STRING, error_time TIMESTAMP, {RECORD_ID} STRING, {ORIGIN} STRING, {RECORD_BYTES} BINARY"
)
SCHEMA_VERSION = 4
"""2: ``record_id``; 3: ``origin``; 4: ``record_bytes``. A table of an earlier version gets the
columns it lacks, null for its rows, at :meth:`ErrorTable.ensure`."""
_ADDED = {RECORD_ID: "STRING", ORIGIN: "STRING", RECORD_BYTES: "BINARY"}
_STATS = {"delta.dataSkippingStringPrefixLength": "256"}
"""Delta keeps the first 32 characters of a string's least and greatest value per file; paths
differ further on: without more, the files' statistics could not skip other batches' origins."""
_DIGEST = "__engine_record_digest"


def record_id(place: list[Column], record: Column, reasons: Column) -> Column:
    """The digest of a rejected record: ``place`` (job, DAG, source, dataset, file), the record and
    its reasons. Every part is kept apart in a JSON array, so no two different records collide by
    concatenation."""
    return F.sha2(F.to_json(F.array(*[c.cast("string") for c in place], record, F.to_json(reasons))), 256)


def with_record_ids(rows: DataFrame, digest: Column) -> DataFrame:
    """``rows`` with :data:`RECORD_ID`: ``digest`` and the record's number among the rows of the
    same digest (a file holding the same bad line twice keeps both; read again, the same two ids)."""
    nth = F.row_number().over(Window.partitionBy(_DIGEST).orderBy(_DIGEST))
    numbered = rows.withColumn(_DIGEST, digest)
    return numbered.withColumn(RECORD_ID, F.concat_ws("-", F.col(_DIGEST), nth.cast("string"))).drop(_DIGEST)


Origins = tuple[str | None, str | None]
"""The least and greatest :data:`ORIGIN` of a batch's rejected records (``None, None``: all null)."""


def held_scope(job: str, dag: str, origins: Origins | None) -> Column:
    """Which of the table's rows could hold the id of a record that DAG ``dag`` of ``job``
    rejected with an origin within ``origins`` (``None``: any origin). An id digests its job, DAG
    and origin, so a row of another job or DAG, or of an origin outside the range, cannot; a row
    with no origin (written before the column existed) might."""
    scope = (F.col("job") == job) & (F.col("dag") == dag)
    if origins is None:
        return scope
    low, high = origins
    origin = F.col(ORIGIN)
    return scope & (origin.isNull() if low is None or high is None else origin.isNull() | origin.between(low, high))


class ErrorTable:
    """One job's error table. :meth:`ensure` creates it before DAGs write to it concurrently
    (concurrent first writes to an empty Delta directory conflict)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def ensure(self, spark: SparkSession, *, backend: str = AUTO, options: Mapping[str, str] | None = None) -> None:
        # delta-rs on a local lake: an existing table costs a log read, not Spark's snapshot of it
        table = meta_table(
            spark, self.path, ERROR_TABLE_DDL, version=SCHEMA_VERSION, what="error", backend=backend, options=options
        ).ensure(properties=_STATS)
        wanted = {VERSION_PROPERTY: str(SCHEMA_VERSION), **_STATS}
        if any(table.properties.get(k) != v for k, v in wanted.items()):  # as ensure read them: no extra job
            retry_conflicts(lambda: self._upgrade(spark, wanted), what="upgrading the error table", racing=True)

    def _upgrade(self, spark: SparkSession, properties: dict[str, str]) -> None:
        """Give a table of an earlier schema version the columns and properties it lacks (another
        job may just have)."""
        has = set(spark.read.format("delta").load(self.path).columns)
        table = f"delta.`{self.path}`"
        if lacking := [c for c in _ADDED if c not in has]:
            spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(f'{c} {_ADDED[c]}' for c in lacking)})")
        settings = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({settings})")

    def new_rows(self, rows: DataFrame, scope: Column | None = None) -> DataFrame:
        """``rows`` without those whose ``record_id`` the table already holds (a table nothing was
        written to yet holds none: no read of it, on a first run no Delta snapshot to build). A
        table of few files is read as the files its checksum lists: no Spark job to build its
        Delta state, which every run would otherwise pay for the table's new version.

        ``scope`` (:func:`held_scope`) says which of the table's rows could hold one of the ids.
        Each file of the table holds one batch's rows, so Delta's file statistics (or Parquet's,
        for a table read as listed files) skip the files of other DAGs, and of batches that read
        other files: staging need not read every id the table ever held."""
        if never_written(self.path):
            return rows
        kept = read_kept(rows.sparkSession, self.path)
        held = (kept if scope is None else kept.where(scope)).select(RECORD_ID).where(F.col(RECORD_ID).isNotNull())
        return rows.join(held, on=RECORD_ID, how="left_anti")

    def stage(self, rows: DataFrame, batch: BatchRef, fs: HadoopFs, scope: Column | None = None) -> Staged:
        return stage_delta(
            self.new_rows(rows, scope),
            batch,
            fs,
            sink="errors",
            table=self.path,
            app_id=f"{batch.app_id}:_errors",
        )

    def append(self, rows: DataFrame) -> None:
        rows.write.format("delta").mode("append").save(self.path)


REPLAYED_DDL = f"job STRING, dag STRING, {RECORD_ID} STRING, run_id STRING, replayed_at TIMESTAMP"
REPLAYED_SCHEMA_VERSION = 1


class ReplayedTable:
    """The record ids of error rows a replay published (``_engine/replayed``), staged in the same
    commit sequence as the replay's sinks (its own ``txnAppId``): a record is published once, and
    the next replay reads its row no more (:mod:`engine.sources.error_rows`)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def ensure(self, spark: SparkSession, *, backend: str = AUTO, options: Mapping[str, str] | None = None) -> None:
        ddl, version = REPLAYED_DDL, REPLAYED_SCHEMA_VERSION
        meta_table(spark, self.path, ddl, version=version, what="replayed", backend=backend, options=options).ensure()

    def stage(self, ids: DataFrame, batch: BatchRef, fs: HadoopFs, *, run_id: str) -> Staged:
        """Stage ``ids`` (one column, :data:`RECORD_ID`) as replayed by ``batch`` of run ``run_id``."""
        rows = ids.select(
            F.lit(batch.job).alias("job"),
            F.lit(batch.dag).alias("dag"),
            F.col(RECORD_ID),
            F.lit(run_id).alias("run_id"),
            F.current_timestamp().alias("replayed_at"),
        )
        return stage_delta(rows, batch, fs, sink="replayed", table=self.path, app_id=f"{batch.app_id}:_replayed")
