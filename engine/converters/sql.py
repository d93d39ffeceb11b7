"""``sql``: a Spark SQL query over the records so far, named ``input``.

Spark checks the statement twice, neither time running a job: its parser (a syntax error, or a
statement that is not a query, is a config error naming the key) and its analysis of the statement
as written over the records' own columns (an unknown column names the columns there are). What runs
is the statement :func:`~engine.converters.sqltext.rewrite` gives, which carries the engine's
columns through it and turns its filters into the dropped mark.

The records are ``input`` only while Spark analyses a statement: a view made and dropped under one
lock, as the groups of a run share their session on threads. A DataFrame keeps the plan it was
analysed with, so it outlives the view.

An aggregating statement reads the records twice (the live ones through the statement, the others
straight to the output), so the records are persisted at the step until the run :meth:`releases
<SqlConverter.release>` them: the source is read once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from engine.converters import conf
from engine.converters.base import Converter, first_line
from engine.converters.conf import SqlConf
from engine.converters.frame import (
    DATASET,
    DROPPED,
    ERRORS,
    FILE,
    RAW,
    RECORD_JSON,
    SOURCE,
    WARNINGS,
    data_columns,
    is_rejected,
    no_errors,
    no_warnings,
)
from engine.converters.sqltext import INPUT, Refused, rewrite, round_trip
from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_VIEWS = threading.Lock()


class SqlConverter(Converter):
    """See :class:`~engine.converters.conf.SqlConf`."""

    Conf = conf.SqlConf
    conf: conf.SqlConf

    def __init__(self, config: SqlConf, *, step: str, key: str) -> None:
        super().__init__(config, step=step, key=key)
        self._persisted: list[DataFrame] = []
        self._lock = threading.Lock()

    def check(self, spark: SparkSession) -> None:
        statement = self.conf.statement
        self._parse(spark, statement)  # Spark's grammar, which may refuse what sqlglot took
        self._parse(spark, f"SELECT * FROM (\n{statement}\n) AS __engine_sql", query=True)

    def _apply(self, frame: DataFrame) -> DataFrame:
        data = data_columns(frame)
        engine = [c for c in frame.columns if c not in data]
        key = f"{self.key}.statement"
        try:  # Spark's analysis of the statement as written: its messages name the records' columns
            written = _analysed(frame.select(*[F.col(f"`{c}`") for c in data]), self.conf.statement)
        except AnalysisException as exc:
            raise ConfigError(f"converter `{self.step}`: the statement: {first_line(exc)}", key=key) from exc
        try:
            plan = rewrite(self.conf.statement, data, engine)
            self._same_when_written_back(frame.select(*[F.col(f"`{c}`") for c in data]), written)
        except Refused as exc:
            raise ConfigError(f"converter `{self.step}`: the statement {exc}", key=key) from exc
        if plan.aggregating:
            frame = frame.persist()
            with self._lock:
                self._persisted.append(frame)
        try:
            out = _analysed(frame, plan.sql)
        except AnalysisException as exc:  # the statement as the engine runs it (not seen so far)
            said = f"{first_line(exc)}; as run, with the engine's columns: {plan.sql}"
            raise ConfigError(f"converter `{self.step}`: the statement: {said}", key=key) from exc
        return _with_unread(frame, out) if plan.aggregating else out

    def _same_when_written_back(self, records: DataFrame, written: DataFrame) -> None:
        """Refuse a statement the rewrite's parser would read otherwise than Spark does (a
        function it renders with other defaults): the statement parsed and written back, nothing
        rewritten, must be the same query to Spark (its optimized plan, compared without a job)."""
        back = round_trip(self.conf.statement, data_columns(records))
        try:
            again = _analysed(records, back)
        except AnalysisException as exc:
            raise Refused(f"cannot be rewritten faithfully ({first_line(exc)}): written back it reads {back}") from exc
        # optimized: the WITH names inlined (analysed plans number their CTE definitions apart)
        same = written._jdf.queryExecution().optimizedPlan().sameResult(again._jdf.queryExecution().optimizedPlan())
        if not same or written.schema != again.schema:
            raise Refused(f"cannot be rewritten faithfully: written back, {back} is another query to Spark")

    def release(self) -> None:
        with self._lock:
            persisted, self._persisted = self._persisted, []
        for frame in persisted:
            frame.unpersist()

    def _parse(self, spark: SparkSession, text: str, *, query: bool = False) -> None:
        try:
            spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
        except Py4JJavaError as exc:
            said = "is not a query" if query else f"does not parse: {first_line(exc.java_exception)}"
            raise ConfigError(f"converter `{self.step}`: the statement {said}", key=f"{self.key}.statement") from exc


def _analysed(frame: DataFrame, statement: str) -> DataFrame:
    """``statement`` over ``frame`` as ``input``, analysed (no job runs)."""
    spark = frame.sparkSession
    with _VIEWS:
        frame.createOrReplaceTempView(INPUT)
        try:
            return spark.sql(statement)
        finally:  # the session catalog's drop: the Catalog API's would uncache a persisted frame too
            spark._jsparkSession.sessionState().catalog().dropTempView(INPUT)


def _with_unread(frame: DataFrame, out: DataFrame) -> DataFrame:
    """An aggregating statement's rows as new records, with the records it did not read (rejected or
    dropped before the step): those keep their raw record as text (their columns are gone)."""
    data = [F.col(f"`{c}`") for c in data_columns(out)]
    carried = [c for c in (FILE, DATASET) if c in frame.columns]
    fresh = out.select(
        *data,
        no_errors().alias(ERRORS),
        F.struct(*data).alias(SOURCE),
        F.lit(None).cast("string").alias(RAW),
        F.lit(False).alias(DROPPED),
        *([F.lit("").alias(FILE)] if FILE in frame.columns else []),
        *([F.col(DATASET)] if DATASET in frame.columns else []),
        *([no_warnings().alias(WARNINGS)] if WARNINGS in frame.columns else []),
    )
    unread = frame.where(is_rejected() | F.col(DROPPED)).select(
        F.col(ERRORS),
        F.coalesce(F.col(RAW), F.to_json(F.col(SOURCE), RECORD_JSON)).alias(RAW),
        F.col(DROPPED),
        *[F.col(c) for c in carried],
        *([F.col(WARNINGS)] if WARNINGS in frame.columns else []),
    )
    return fresh.unionByName(unread, allowMissingColumns=True)
