"""A DAG's rows of its error table, read again as the records its source read (``mode=replay``).

A replay is the DAG itself with this source in place of its own, in a scope of its own
(``replay``): its converters, forks and sinks, its commit sequence and batch numbers. The one
dataset is ``replay:<job>.<dag>``; its watermark is the error table's version the last replay read.

Planning fixes the error table's latest version, so a plan re-executed after a crash reads the same
rows: those that match the filters (run, step, reason) and carry a record id the marks table
(``_engine/replayed``) does not hold. The runtime stages the ids of the records that passed into the
marks table in the same commit sequence as the sinks (:class:`engine.sinks.error_table.ReplayedTable`),
so a record is published once and never replayed again; one rejected again is not marked and its
row stays as it was.

Each record's id rides in the engine's file column (:data:`engine.columns.FILE`), which the fork
keeps for rejected records only: the runtime takes the ids read less those.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.columns import DATASET, FILE, READ_STEP, RECORD_BYTES, RECORD_ID, SKIPPED_FILE
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, PlanContext, Source
from engine.sources.conf import ErrorRowsConf
from engine.sources.record_errors import corrupt_reason
from engine.sources.workunits import Size, WorkUnit
from engine.state.watermarks import LongWatermark
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

SCOPE = "replay"
"""The scope of a replay's bookkeeping: the DAG's live watermarks do not move."""


class ErrorRowsSource(Source):
    """The rows one DAG rejected, parsed back into records; see the module docstring."""

    Conf = ErrorRowsConf
    conf: ErrorRowsConf

    @property
    def scope(self) -> str:
        return SCOPE

    @property
    def dataset(self) -> str:
        return f"replay:{self.conf.job}.{self.conf.dag}"

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        """One unit reading the error table at its latest version, or an empty one when no row is
        left to replay (one count of the matching rows: replays are rare and small)."""
        low = ctx.low(self.dataset)
        version = HadoopFs(spark).delta_version(self.conf.table)
        if version < 0:
            return [WorkUnit.carry(self.dataset, low, "no error table")]
        rows = self.rows(spark, version).count()
        if rows == 0:
            return [WorkUnit.carry(self.dataset, low, f"no error row to replay (error table version {version})")]
        note = f"{rows} error row(s) at error table version {version}"
        return [WorkUnit(self.dataset, low, LongWatermark(version), size=Size(records=rows), note=note)]

    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        schema = self.declared_schema()
        assert schema is not None  # built with the source's schema
        return schema if CORRUPT_RECORD in schema.fieldNames() else schema.add(CORRUPT_RECORD, "string")

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        rows = self.rows(spark, _version(units))
        parsed = F.col("__parsed")
        fields = [F.col(f"`{f.name}`") for f in schema.fields]
        records = rows.select(self._parsed(schema).alias("__parsed"), RECORD_ID, "step").select(
            *[parsed[f.name].alias(f.name) for f in schema.fields], RECORD_ID, "step"
        )
        return records.select(
            *fields,
            self._reason(schema).alias(CORRUPT_REASON),
            F.col(RECORD_ID).alias(FILE),
            F.lit(self.dataset).alias(DATASET),
        )

    def unreadable(self, spark: SparkSession) -> str | None:
        """Why the stored records cannot be parsed back with the source's schema (e.g. a map keyed
        by anything but strings, which Spark's JSON parser refuses); ``None`` when they can.
        Spark analyses the parse over no rows: no job runs."""
        from pyspark.errors import AnalysisException

        schema = self.schema(spark, None)
        assert schema is not None  # built with the source's schema
        empty = spark.createDataFrame([], "record STRING, step STRING")
        try:
            empty.select(self._parsed(schema)).schema  # noqa: B018 (analysed, not read)
        except AnalysisException as exc:
            return str(exc).split("\n", 1)[0]
        return None

    def record_ids(self, spark: SparkSession, units: list[WorkUnit]) -> DataFrame:
        """The ids (:data:`RECORD_ID`) of the rows :meth:`read` reads of ``units``, unparsed."""
        return self.rows(spark, _version(units)).select(RECORD_ID)

    def rows(self, spark: SparkSession, version: int) -> DataFrame:
        """The DAG's error rows at ``version`` that match the filters and were never replayed."""
        conf = self.conf
        table = spark.read.format("delta").option("versionAsOf", version).load(conf.table)
        wanted = (F.col("job") == conf.job) & (F.col("dag") == conf.dag) & F.col(RECORD_ID).isNotNull()
        # A skipped file's row names the file, not a record; a read rejection of a source that keeps
        # no text of it cannot be read back as one (it would pass as a record of nulls).
        wanted &= ~F.exists(F.col("reasons"), lambda r: r.startswith(f"{READ_STEP}: {SKIPPED_FILE}"))
        if not conf.read_rows:
            wanted &= F.col("step") != READ_STEP
        if conf.run is not None:
            wanted &= F.col("run_id") == conf.run
        if conf.step is not None:
            wanted &= F.col("step") == conf.step
        if (text := conf.reason) is not None:
            wanted &= F.exists(F.col("reasons"), lambda r: r.contains(text))
        rows = table.where(wanted).select(RECORD_ID, "step", self._record(table))
        if HadoopFs(spark).delta_version(conf.marks) < 0:
            return rows
        marks = spark.read.format("delta").load(conf.marks)
        done = marks.where((F.col("job") == conf.job) & (F.col("dag") == conf.dag)).select(RECORD_ID)
        return rows.join(done, on=RECORD_ID, how="left_anti")

    def _record(self, table: DataFrame) -> Column:
        """A row's record: its bytes decoded as the source's ``encoding`` says, where the table
        kept them (not UTF-8 when rejected), else its text."""
        if RECORD_BYTES not in table.columns:  # a table written before it had the column
            return F.col("record")
        options = {k.lower(): str(v) for k, v in self.conf.options.items()}
        charset = options.get("encoding", options.get("charset", "UTF-8"))
        decoded = F.decode(F.col(RECORD_BYTES), charset)
        return F.when(F.col(RECORD_BYTES).isNotNull(), decoded).otherwise(F.col("record")).alias("record")

    def _as_read(self) -> Column:
        """Whether a row holds the text the source could not parse (else the JSON of a record)."""
        return F.col("step") == READ_STEP

    def _parsed(self, schema: StructType) -> Column:
        """The record as a struct of ``schema``; text that does not fit it is kept in its corrupt column."""
        permissive = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
        record = F.col("record")
        as_json = F.from_json(record, schema, permissive)  # what the engine wrote: Spark's own JSON
        own = {**self.conf.options, **permissive}  # what the source read: its reader's options
        if self.conf.format == "csv":
            as_read = F.from_csv(record, F.lit(schema.toDDL()), own)
        else:
            as_read = F.from_json(record, schema, own)
        return F.when(self._as_read(), as_read).otherwise(as_json)

    def _reason(self, schema: StructType) -> Column:
        """Why a record still does not fit the schema, as the source's own read would say it."""
        options = dict(self.conf.options)
        fmt = "csv" if self.conf.format == "csv" else "json"
        as_read = corrupt_reason(fmt, schema, CORRUPT_RECORD, options)
        return F.when(self._as_read(), as_read).otherwise(corrupt_reason("json", schema, CORRUPT_RECORD, {}))


def _version(units: list[WorkUnit]) -> int:
    """The error table version the one unit of a replay's plan reads."""
    (unit,) = [u for u in units if not u.empty]
    assert isinstance(unit.high, LongWatermark)
    return unit.high.value
