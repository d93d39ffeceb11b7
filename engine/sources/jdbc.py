"""A table or query over JDBC, read incrementally by a numeric or timestamp column.

Planning asks the database (one small query through Spark's JDBC reader) for the column's
overall maximum and, above the watermark, the maximum and row count. The work unit reads
``(low, high]`` in ``partitions`` parallel range predicates over the column. With
``limits.max_records`` the high bound is lowered to the value at that row count (``ORDER BY column
LIMIT 1 OFFSET n - 1``); rows sharing that value are all read, so a run may take a few more.

Checked, never silently skipped: the column must exist and be numeric or a timestamp (a type
change against the stored watermark is refused); rows with a NULL there are counted and logged on
the first run; a maximum below the stored watermark means the source went backwards (an error).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    TimestampNTZType,
    TimestampType,
)

from engine.columns import DATASET
from engine.commit.jdbc import connection_options
from engine.commit.jdbc_errors import database_error
from engine.errors import ConfigError, EngineError, JobFailedError
from engine.sources.base import PlanContext, Source
from engine.sources.conf import JdbcSourceConf
from engine.sources.workunits import Size, WorkUnit
from engine.state.watermarks import LongWatermark, TimestampWatermark, Watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_LONGS = (ByteType, ShortType, IntegerType, LongType)
_TIMES = (TimestampType, TimestampNTZType, DateType)


class JdbcSource(Source):
    """See :class:`~engine.sources.conf.JdbcSourceConf` for its config."""

    Conf = JdbcSourceConf
    conf: JdbcSourceConf

    @property
    def dataset(self) -> str:
        return self.conf.dataset_urn()

    _schema: StructType | None = None

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        self._kind(spark)  # the column exists and has a usable type

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        inc = self.conf.incremental
        if inc is None:
            return [WorkUnit(self.dataset, None, None, payload=(None, None), note="full read (no incremental column)")]
        kind = self._kind(spark)
        low = ctx.low(self.dataset)
        if low is not None and low.kind != kind:
            raise ConfigError(
                f"the column `{inc.column}` is now a {kind} but the stored watermark is a {low.kind}: its type "
                "changed. Set the checkpoint to a value of the new type (mode=checkpoint) to go on",
                key=f"{self.key}.incremental.column",
            )
        if self.conf.backfill:
            start = _parse(kind, self.conf.from_) if self.conf.from_ else None
            low = low or (_minus_one(start) if start is not None else None)
        ceiling = _parse(kind, self.conf.to) if self.conf.to else None
        if kind == "timestamp" and float(inc.lag) > 0:
            lagged = TimestampWatermark(ctx.now - timedelta(seconds=float(inc.lag)))
            ceiling = lagged if ceiling is None or lagged.at_most(ceiling) else ceiling
        top, last, count, nulls = self._bounds(spark, low, ceiling)
        if nulls:
            log.warning(
                "%s: %d row(s) have NULL in %s and are never read incrementally", self.dataset, nulls, inc.column
            )
        if low is not None and top is not None and not self.conf.backfill and not low.at_most(_wm(kind, top)):
            raise JobFailedError(
                f"{self.dataset}: the largest {inc.column} is {top}, below the stored watermark {low.display()}: the "
                "source went backwards (reloaded?). Nothing was read; check it, then reset or set the checkpoint"
            )
        if not count:
            return [WorkUnit.carry(self.dataset, low, "no new rows")]
        high = _wm(kind, last)
        limit = ctx.per_dataset.tighter(ctx.per_run).max_records
        if limit == 0 and not ctx.guarantee:
            return [WorkUnit.carry(self.dataset, low, "throttled (job limit reached)")]
        limit = max(1, limit) if limit is not None else None
        note = ""
        if limit and count > limit:
            high = _wm(kind, self._nth(spark, low, limit))
            note = f"throttled to {limit} of {count} rows"
            count = limit
        payload = (low, high)
        return [WorkUnit(self.dataset, low, high, size=Size(records=count), payload=payload, note=note)]

    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        """The relation's schema, asked of the database once per run (check, plan and the chain's
        analysis all need it)."""
        if self._schema is None:
            self._schema = self._asked(
                lambda: self._reader(spark).option("dbtable", self.conf.relation()).load().schema,
                "read the schema of",
            )
        return self._schema

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        (unit,) = [u for u in units if not u.empty]
        low, high = unit.payload
        conf = self.conf
        props = {k: str(v) for k, v in self._options().items() if k != "url"}
        if conf.incremental is None:
            frame = self._asked(lambda: self._reader(spark).option("dbtable", conf.relation()).load(), "read")
        else:
            preds = _ranges(conf.incremental.column, low, high, conf.partitions)
            frame = self._asked(
                lambda: spark.read.jdbc(conf.url, conf.relation(), predicates=preds, properties=props), "read"
            )
        out: DataFrame = frame.withColumn(DATASET, F.lit(unit.dataset))
        return out

    # -- the database -------------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        conf = self.conf
        opts = connection_options(conf.url, user=conf.user, password=conf.password, driver=conf.driver)
        return {**opts, "fetchsize": conf.fetch_size, **conf.options}

    def _reader(self, spark: SparkSession) -> DataFrameReader:
        return spark.read.format("jdbc").options(**{k: str(v) for k, v in self._options().items()})

    def _query(self, spark: SparkSession, sql: str) -> list[Any]:
        row = self._asked(lambda: self._reader(spark).option("query", sql).load().first(), "ask the bounds of")
        return list(row) if row is not None else []

    def _asked(self, ask: Callable[[], _T], doing: str) -> _T:
        """What ``ask`` gets from the database; its failure as the engine's error saying the cause
        (the database cannot be reached, refuses the login, or has no such table), naming this
        source and never its password."""
        try:
            return ask()
        except EngineError:
            raise
        except Exception as exc:  # the driver's errors reach Python as py4j's, whatever their kind
            what = self.conf.table or "the query"
            raise database_error(
                exc,
                doing=f"{doing} {what} (source `{self.name}`)",
                url=self.conf.url,
                key=self.key,
                password=self.conf.password,
                relation="table" if self.conf.table else "query",
            ) from exc

    def _kind(self, spark: SparkSession) -> str:
        inc = self.conf.incremental
        if inc is None:
            return "none"
        fields = {f.name.lower(): f for f in self.schema(spark, None).fields}  # type: ignore[union-attr]
        found = fields.get(inc.column.lower())
        if found is None:
            raise ConfigError(
                f"the incremental column `{inc.column}` is not in {self.conf.table or 'the query'}; "
                f"columns: {', '.join(sorted(fields))}",
                key=f"{self.key}.incremental.column",
            )
        dtype = found.dataType
        actual = (
            "long"
            if isinstance(dtype, _LONGS) or (isinstance(dtype, DecimalType) and dtype.scale == 0)
            else "timestamp"
            if isinstance(dtype, _TIMES)
            else None
        )
        if actual is None:
            raise ConfigError(
                f"the incremental column `{inc.column}` is {dtype.simpleString()}; "
                "it must be an integer or a timestamp",
                key=f"{self.key}.incremental.column",
            )
        if inc.kind != "auto" and inc.kind != actual:
            raise ConfigError(
                f"the incremental column `{inc.column}` is a {actual}, not a {inc.kind}",
                key=f"{self.key}.incremental.kind",
            )
        return actual

    def _bounds(self, spark: SparkSession, low: Watermark | None, ceiling: Watermark | None) -> list[Any]:
        col = self.conf.incremental.column  # type: ignore[union-attr]
        above = _above(col, low, ceiling)
        nulls = f"SUM(CASE WHEN {col} IS NULL THEN 1 ELSE 0 END)" if low is None else "0"
        sql = (
            f"SELECT MAX({col}) AS top, MAX(CASE WHEN {above} THEN {col} END) AS hi, "
            f"SUM(CASE WHEN {above} THEN 1 ELSE 0 END) AS n, {nulls} AS nulls FROM {self.conf.relation()}"
        )
        top, hi, n, null_count = self._query(spark, sql)
        return [top, hi, int(n or 0), int(null_count or 0)]

    def _nth(self, spark: SparkSession, low: Watermark | None, n: int) -> Any:
        col = self.conf.incremental.column  # type: ignore[union-attr]
        sql = (
            f"SELECT {col} AS v FROM {self.conf.relation()} WHERE {_above(col, low, None)} "
            f"ORDER BY {col} LIMIT 1 OFFSET {n - 1}"
        )
        return self._query(spark, sql)[0]


def _literal(mark: Watermark) -> str:
    if isinstance(mark, TimestampWatermark):
        return f"TIMESTAMP '{mark.value.isoformat(sep=' ')}'"
    assert isinstance(mark, LongWatermark)
    return str(mark.value)


def _above(col: str, low: Watermark | None, ceiling: Watermark | None) -> str:
    parts = [f"{col} IS NOT NULL"]
    if low is not None:
        parts.append(f"{col} > {_literal(low)}")
    if ceiling is not None:
        parts.append(f"{col} <= {_literal(ceiling)}")
    return " AND ".join(parts)


def _ranges(col: str, low: Watermark | None, high: Watermark, n: int) -> list[str]:
    """``n`` predicates that together cover ``(low, high]`` exactly once."""
    if isinstance(high, LongWatermark):
        lo = low.value if isinstance(low, LongWatermark) else None
        if lo is None or n == 1:
            return [_above(col, low, high)]
        step = max(1, -(-(high.value - lo) // n))
        cuts = [lo + step * i for i in range(n) if lo + step * i < high.value] + [high.value]
        return [_above(col, LongWatermark(a), LongWatermark(b)) for a, b in itertools.pairwise(cuts)]
    assert isinstance(high, TimestampWatermark)
    if not isinstance(low, TimestampWatermark) or n == 1:
        return [_above(col, low, high)]
    span = (high.value - low.value) / n
    times = [low.value + span * i for i in range(n)] + [high.value]
    return [_above(col, TimestampWatermark(a), TimestampWatermark(b)) for a, b in itertools.pairwise(times) if a < b]


def _wm(kind: str, value: Any) -> Watermark:
    if kind == "long":
        return LongWatermark(int(value))
    if isinstance(value, datetime):
        return TimestampWatermark(value)
    return TimestampWatermark(datetime(value.year, value.month, value.day))  # a DATE column


def _parse(kind: str, text: str) -> Watermark:
    from engine.state.watermarks import parse_cli

    return parse_cli(kind, text, key="from")


def _minus_one(start: Watermark) -> Watermark:
    """The low watermark that makes ``start`` itself the first value read (bounds are ``(low, high]``)."""
    if isinstance(start, LongWatermark):
        return LongWatermark(start.value - 1)
    assert isinstance(start, TimestampWatermark)
    return TimestampWatermark(start.value - timedelta(microseconds=1))
