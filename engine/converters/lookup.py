"""``lookup``: each record enriched with the columns of a reference table, matched on keys.

The reference is read once per run: the first use fixes it (a Delta table at its version of that
moment) and caches the rows the join needs, so every work-unit group of the run joins the same
snapshot. It is broadcast when Spark estimates it at
most ``broadcast_max``, else joined with a shuffle.

No Python runs per record: the join, the match test and the rejection reason are Spark
expressions. A key with several reference rows fails the batch through ``raise_error`` when a
record carries it (``duplicates = fail``): the check rides on the error column every record's
fate is read from, so the optimizer cannot prune it.
"""

from __future__ import annotations

import functools
import logging
import operator
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from py4j.protocol import Py4JError
from pyspark.errors import AnalysisException
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    IntegralType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine.commit.jdbc import connection_options
from engine.commit.jdbc_errors import database_error
from engine.converters import conf
from engine.converters.base import Converter, first_line, is_checking
from engine.converters.builtins import ordered, sort_column
from engine.converters.conf import LookupConf, split_sort_order
from engine.converters.frame import DROPPED, ERRORS, data_columns, is_rejected, reject
from engine.errors import ConfigError
from engine.plugins.conf import option_texts
from engine.plugins.ddl import declared_columns
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

_OURS = "__engine_lookup_"
"""What the names of the columns the join needs but no record keeps start with."""
_KEY = "__engine_lookup_key_{}"
_FOUND = "__engine_lookup_found"
_COUNT = "__engine_lookup_rows"
_RANK = "__engine_lookup_rank"
_REF = "__engine_lookup_ref_{}"
"""A reference column an ``on`` condition reads, renamed so that it cannot clash with the records'."""
_ORDER = "__engine_lookup_order_{}"
_RECORD = "__engine_lookup_record"
"""A condition join's record id: the rows of one record's matches share it."""


class LookupConverter(Converter):
    """See :class:`~engine.converters.conf.LookupConf`."""

    Conf = conf.LookupConf
    conf: conf.LookupConf

    def __init__(self, config: LookupConf, *, step: str, key: str) -> None:
        super().__init__(config, step=step, key=key)
        self._reference: DataFrame | None = None
        self._held: list[DataFrame] = []
        """What :meth:`release` unpersists: the cached reference, and its counted copy if any."""
        self._broadcast = False
        self._version: int | None = None
        self._live = False
        """Whether a run that reads records planned (:meth:`pin`): only then does the first use
        read the reference into the run's cache (Spark jobs). Before (``mode=validate``), the
        reference is built as the join would read it, and nothing is read."""
        self._lock = threading.RLock()
        """Groups of a run chain their records in parallel threads: one of them prepares the reference."""
        self._condition = config.condition
        """``on`` as a condition, parsed once (``None`` for key columns)."""
        self._order: list[tuple[bool, str | None]] = []
        """A condition join's ``first`` order: each rank column's direction and nulls placement."""
        self._failed: Exception | None = None
        """Why the run's read of the reference failed (or was cancelled by a stop): the other
        groups fail with it rather than read it again."""
        self._schema: StructType | None = None
        """A file reference's schema as the first build found it: later reads do not infer it again."""

    def pin(self, spark: SparkSession, version: int | None) -> None:
        self._live = True
        self._pin(spark, version)

    def _pin(self, spark: SparkSession, version: int | None) -> None:
        c = self.conf
        if c.format != "delta":
            return  # files have no version: a run reads the files there are when it first uses them
        if version is None:
            version = HadoopFs(spark).delta_version(c.path or "")
            if version < 0:
                raise ConfigError(f"converter `{self.step}`: no Delta table at {c.path}", key=f"{self.key}.path")
        if version != self._version:
            self.release()  # a cached reference of another version
        self._version = version

    @property
    def pinned(self) -> int | None:
        return self._version

    def release(self) -> None:
        with self._lock:
            self._unpersist()
            self._reference, self._failed, self._schema = None, None, None

    def _unpersist(self) -> None:
        for held in self._held:
            held.unpersist()
        self._held = []

    @property
    def _record_columns(self) -> list[str]:
        """The records' columns the match reads: the keys, or those a condition names."""
        condition = self._condition
        return list(condition.records) if condition else list(self.conf.on)

    def _apply(self, frame: DataFrame) -> DataFrame:
        c = self.conf
        same = _name_key(frame.sparkSession)
        have = {same(n) for n in frame.columns}
        missing = [k for k in self._record_columns if same(k) not in have]
        if missing:
            raise ConfigError(
                f"converter `{self.step}`: key column(s) {', '.join(missing)} not in the records; "
                f"their columns: {', '.join(data_columns(frame))}",
                key=f"{self.key}.on",
            )
        reference = self._prepared(frame.sparkSession)
        brought = [n for n in reference.columns if not n.startswith(_OURS)]
        clash = [n for n in brought if same(n) in have]
        if clash:
            raise ConfigError(
                f"converter `{self.step}`: the records already have column(s) {', '.join(clash)}; "
                f"set {self.key}.prefix to bring them under other names",
                key=f"{self.key}.prefix",
            )
        joined = self._joined(frame, reference)
        found = F.coalesce(F.col(_FOUND), F.lit(False))
        if c.duplicates == "fail" and _COUNT in joined.columns:  # a key repeats, or a condition's matches
            joined = joined.withColumn(ERRORS, F.when(F.col(_COUNT) > 1, self._too_many()).otherwise(F.col(ERRORS)))
        if c.on_missing == "reject":
            joined = reject(joined, ~found, step=self.step, reason=self._no_match())
        elif c.on_missing == "drop":
            joined = joined.withColumn(DROPPED, F.col(DROPPED) | (~found & ~is_rejected()))
        return joined.drop(*[n for n in joined.columns if n.startswith(_OURS)])

    def _joined(self, frame: DataFrame, reference: DataFrame) -> DataFrame:
        """Each record with its match (a left join): by key, against one row per key; by a
        condition, each record's matches counted (``fail``) or ranked to keep the first (``first``)."""
        condition = self._condition
        if condition is None:
            match = [F.col(f"`{k}`") == F.col(_KEY.format(i)) for i, k in enumerate(self.conf.on)]
            return frame.join(reference, on=functools.reduce(operator.and_, match), how="left")
        try:
            on = F.expr(condition.sql(_REF))
            joined = frame.withColumn(_RECORD, F.monotonically_increasing_id()).join(reference, on=on, how="left")
        except AnalysisException as exc:
            said = f"converter `{self.step}`: the join condition {first_line(exc)}"
            raise ConfigError(said, key=f"{self.key}.on") from exc
        matches = Window.partitionBy(_RECORD)
        if self.conf.duplicates == "fail":
            return joined.withColumn(_COUNT, F.count(_FOUND).over(matches))
        order = [ordered(F.col(_ORDER.format(i)), down, nulls) for i, (down, nulls) in enumerate(self._order)]
        ranked = matches.orderBy(*order or [F.lit(1)])
        return joined.withColumn(_RANK, F.row_number().over(ranked)).where(F.col(_RANK) == 1)

    def _prepared(self, spark: SparkSession) -> DataFrame:
        """The reference as the join reads it: its key and brought columns, one row per key
        (``duplicates = first``) or, for ``fail``, with each key's row count when some key
        repeats. A run reads it on its first use into the run's cache (the job that fills it
        checks the keys), in the scope of the work-unit group that uses it first; validating, and checking
        the chain while a run plans, only build it, with the count, and read nothing."""
        with self._lock:
            if self._reference is None:
                if not self._live or is_checking():
                    keyed = self._keyed(self._read(spark))
                    return self._counted(keyed) if self._keys_may_repeat else keyed
                if self._failed is not None:
                    raise self._failed
                try:
                    self._reference = self._cached(spark)
                except Exception as exc:
                    self._unpersist()
                    self._failed = exc
                    raise
                size = _estimated_size(self._reference)  # a file's or table's until cached, then the cache's
                self._broadcast = size is not None and size <= self.conf.broadcast_bytes
                how = "broadcast" if self._broadcast else "shuffled"
                read = self.conf.reference if self._version is None else f"{self.conf.reference}@{self._version}"
                log.info("converter `%s`: reference %s, about %s bytes: %s", self.step, read, size, how)
            return F.broadcast(self._reference) if self._broadcast else self._reference

    def _cached(self, spark: SparkSession) -> DataFrame:
        """The reference read once into the run's cache (:meth:`release` frees it). For ``duplicates
        = fail``, the job that fills the cache checks that no key repeats (:meth:`_repeated`; keys
        with a null part left out: they match nothing); only a reference that repeats a key gets
        each key's row count, over the cache. A database table is read at once too: Spark cannot
        size it unread."""
        cached = self._keyed(self._read(spark)).cache()
        self._held = [cached]
        if self._keys_may_repeat:
            if not self._repeated(cached):
                return cached
            counted = self._counted(cached).cache()
            self._held.append(counted)
            counted.count()
            return counted
        if self.conf.format == "jdbc":
            cached.count()
        return cached

    @property
    def _keys_may_repeat(self) -> bool:
        """Whether a key may match several reference rows and fail the batch: ``duplicates =
        fail`` on key columns (a condition's matches are counted after the join)."""
        return self.conf.duplicates == "fail" and self._condition is None

    def _repeated(self, reference: DataFrame) -> bool:
        """Whether some key with no null part has several rows of ``reference``. A reference
        small enough to broadcast (which collects it to the driver anyway) sends its keys to the
        driver as Arrow, in the one job that fills the cache, and pyarrow compares them; a larger
        one, or keys Spark and Arrow might compare differently, is counted by Spark (an
        aggregate with a shuffle: a second stage, and in a fresh JVM its code to compile)."""
        keys = self._key_columns()
        size, keyed = _estimated_size(reference), reference.select(*keys)
        if size is not None and size <= self.conf.broadcast_bytes and all(map(_same_in_arrow, keyed.schema)):
            return _repeated_in_arrow(keyed.toArrow())
        whole = functools.reduce(operator.and_, [k.isNotNull() for k in keys])
        rows, distinct = reference.agg(F.count(F.when(whole, F.lit(1))), F.count_distinct(*keys)).first() or (0, 0)
        return bool(rows != distinct)

    def _counted(self, keyed: DataFrame) -> DataFrame:
        """``keyed`` (:meth:`_keyed`) with each key's row count, which fails a record with a
        repeated key (:meth:`_too_many`)."""
        return keyed.withColumn(_COUNT, F.count(F.lit(1)).over(Window.partitionBy(*self._key_columns())))

    def _key_columns(self) -> list[Column]:
        """The keys as :meth:`_keyed` names them in the reference."""
        return [F.col(_KEY.format(i)) for i in range(len(self.conf.on))]

    def _read(self, spark: SparkSession) -> DataFrame:
        c = self.conf
        if c.format == "jdbc":
            return self._read_database(spark)
        reader = spark.read.format(c.format).options(**option_texts(c.options))
        if c.format == "delta":
            if self._version is None:
                self._pin(spark, None)
            reader = reader.option("versionAsOf", self._version)
        elif c.schema_ is not None:
            reader = reader.schema(
                declared_columns(c.schema_, what=f"converter `{self.step}`", key=f"{self.key}.schema")
            )
        elif self._schema is not None:  # inferring a JSON or CSV schema is a Spark job: once a run
            reader = reader.schema(self._schema)
        try:
            read = reader.load(c.path)
        except AnalysisException as exc:
            raise ConfigError(
                f"converter `{self.step}`: cannot read the reference {c.path}: {first_line(exc)}",
                key=f"{self.key}.path",
            ) from exc
        if c.format != "delta":
            self._schema = read.schema
        return read

    def _read_database(self, spark: SparkSession) -> DataFrame:
        """The database table (or query) as one Spark JDBC read; its schema is asked for now."""
        c = self.conf
        login = connection_options(c.url or "", user=c.user, password=c.password, driver=c.driver)
        what = {"dbtable": c.table} if c.table else {"query": c.query or ""}
        reader = spark.read.format("jdbc").options(**login, **what, **option_texts(c.options))
        try:
            return reader.load()
        except Exception as exc:  # the driver's errors reach Python as Py4J's: the cause is in the Java chain
            relation = "table" if c.table else "query"
            raise database_error(
                exc,
                doing=f"read the reference {c.reference} (converter `{self.step}`)",
                url=c.url or "",
                key=self.key,
                password=c.password,
                relation=relation,
            ) from exc

    def _keyed(self, reference: DataFrame) -> DataFrame:
        """The reference's columns the join reads: the keys (or what a condition compares and
        ranks by) and the brought columns; one row per key for ``duplicates = first``."""
        c = self.conf
        condition = self._condition
        same = _name_key(reference.sparkSession)
        has = {same(n) for n in reference.columns}
        matched = list(condition.reference) if condition else c.on
        absent = [n for n in dict.fromkeys([*matched, *c.columns]) if same(n) not in has]
        if absent:
            raise ConfigError(
                f"converter `{self.step}`: the reference {c.reference} has no column(s) {', '.join(absent)}; "
                f"its columns: {', '.join(reference.columns)}",
                key=f"{self.key}.{'on' if absent[0] in matched else 'columns'}",
            )
        on = {same(k) for k in c.on} if not condition else set()
        names = c.columns or [n for n in reference.columns if same(n) not in on]
        brought = [F.col(f"`{n}`").alias(f"{c.prefix}{n}") for n in names]
        if condition:  # matched after the join: the condition's columns, and the order of the first
            compared = [F.col(f"`{n}`").alias(_REF.format(n)) for n in condition.reference]
            specs = [split_sort_order(o) for o in c.order_by] or [(f"`{n}`", False, None) for n in names]
            specs = specs if c.duplicates == "first" else []
            self._order = [(down, nulls) for _, down, nulls in specs]
            ranks = [F.expr(e).alias(_ORDER.format(i)) for i, (e, _, _) in enumerate(specs)]
            return reference.select(*compared, *brought, *ranks).withColumn(_FOUND, F.lit(True))
        keys = [F.col(f"`{k}`").alias(_KEY.format(i)) for i, k in enumerate(c.on)]
        if c.duplicates == "first":  # ranked over the reference's own column names
            order = [sort_column(o) for o in c.order_by] or [F.col(f"`{n}`").asc() for n in names] or [F.lit(1)]
            by_key = Window.partitionBy(*[F.col(f"`{k}`") for k in c.on]).orderBy(*order)
            first = reference.withColumn(_RANK, F.row_number().over(by_key)).where(F.col(_RANK) == 1)
            return first.select(*keys, *brought).withColumn(_FOUND, F.lit(True))
        return reference.select(*keys, *brought).withColumn(_FOUND, F.lit(True))

    def _values(self) -> Column:
        """The record's key values (or those its condition reads) as text: ``(a, b) = (1, x)``."""
        named = self._record_columns
        values = F.concat_ws(", ", *[F.coalesce(F.col(f"`{k}`").cast("string"), F.lit("null")) for k in named])
        return F.concat(F.lit(f"({', '.join(named)}) = ("), values, F.lit(")"))

    def _no_match(self) -> Column:
        where = f" where {self.conf.on}," if isinstance(self.conf.on, str) else ""
        return F.concat(F.lit(f"lookup `{self.step}`: no row of {self.conf.reference}{where} with "), self._values())

    def _too_many(self) -> Column:
        said = F.concat(
            F.lit(f"converter `{self.step}` ({self.key}): "),
            self._values(),
            F.lit(" matches "),
            F.col(_COUNT).cast("string"),
            F.lit(f" rows of the reference {self.conf.reference}; fix it, or set {self.key}.duplicates = first"),
        )
        return F.raise_error(said).cast("array<struct<step:string,reason:string>>")


def _name_key(spark: SparkSession) -> Callable[[str], str]:
    """How Spark compares column names in ``spark``: without case, unless
    ``spark.sql.caseSensitive`` is set."""
    if str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true":
        return str
    return str.lower


def _same_in_arrow(field: StructField) -> bool:
    """Whether Arrow tells ``field``'s values apart exactly as Spark's join does: not floating
    point (Spark takes -0.0 for 0.0), nor text under a collation other than the binary one."""
    kind = field.dataType
    if isinstance(kind, StringType):
        return getattr(kind, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(
        kind, (IntegralType, DecimalType, BooleanType, DateType, TimestampType, TimestampNTZType, BinaryType)
    )


def _repeated_in_arrow(keys: pa.Table) -> bool:
    """Whether a row of ``keys`` with no null value repeats another (vectorised: no Python per row)."""
    whole = keys.drop_null()
    return bool(whole.group_by(whole.column_names).aggregate([]).num_rows != whole.num_rows)


def _estimated_size(frame: DataFrame) -> int | None:
    """Spark's estimate of ``frame``'s size (from file sizes and the log: no job); ``None`` when
    it has none."""
    try:
        return int(str(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except (Py4JError, ValueError):  # an estimate is a hint: without one, Spark chooses the join itself
        return None
