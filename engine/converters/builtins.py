"""The built-in converters. Each is a few Spark column expressions; none runs Python per record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.converters import conf
from engine.converters.base import Converter
from engine.converters.checks import boolean, check_datetime_pattern, compile_regex
from engine.converters.frame import DROPPED, ERRORS, data_columns, is_rejected, reject
from engine.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def _col(name: str) -> Column:
    return F.col(f"`{name}`")


def _shown(name: str) -> Column:
    """The value of a column as text, for a rejection reason."""
    return F.coalesce(_col(name).cast("string"), F.lit("null"))


class CastConverter(Converter):
    Conf = conf.CastConf
    conf: conf.CastConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        for name, type_ in self.conf.columns.items():
            cast = _col(name).try_cast(type_)
            why = F.concat(F.lit(f"cannot cast `{name}` value '"), _shown(name), F.lit(f"' to {type_}"))
            frame = self.flag(frame, _col(name).isNotNull() & cast.isNull(), reason=why)
        return frame.withColumns({n: _col(n).try_cast(t) for n, t in self.conf.columns.items()})


class RenameConverter(Converter):
    Conf = conf.RenameConf
    conf: conf.RenameConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        missing = [c for c in self.conf.columns if c not in frame.columns]
        if missing:
            frame.select(_col(missing[0]))  # raises Spark's own "column not found" error
        return frame.withColumnsRenamed(self.conf.columns)


class SelectConverter(Converter):
    Conf = conf.SelectConf
    conf: conf.SelectConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        internal = [c for c in frame.columns if c not in data_columns(frame)]
        return frame.select(*[_col(c) for c in self.conf.columns], *internal)


class DropConverter(Converter):
    Conf = conf.DropConf
    conf: conf.DropConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        data = data_columns(frame)
        lower = {c.lower() for c in data}
        missing = [c for c in self.conf.columns if c.lower() not in lower]  # Spark's drop ignores them
        if missing:
            raise ConfigError(
                f"converter `{self.step}` drops `{missing[0]}`, which the records do not have; "
                f"{did_you_mean(missing[0], data)}columns: {', '.join(data)}",
                key=f"{self.key}.columns",
            )
        return frame.drop(*self.conf.columns)


class DeriveConverter(Converter):
    Conf = conf.DeriveConf
    conf: conf.DeriveConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        return frame.withColumns({name: F.expr(sql) for name, sql in self.conf.columns.items()})


class RequireConverter(Converter):
    Conf = conf.RequireConf
    conf: conf.RequireConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        for name in self.conf.columns:
            frame = self.flag(frame, _col(name).isNull(), reason=f"`{name}` is null")
        return frame


class CheckConverter(Converter):
    Conf = conf.CheckConf
    conf: conf.CheckConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        condition = boolean(frame, self.conf.expr, key=f"{self.key}.expr", what=f"converter `{self.step}`")
        holds = F.coalesce(condition, F.lit(False))
        return self.flag(frame, ~holds, reason=self.conf.reason or f"{self.conf.type} failed: {self.conf.expr}")


class ExpectConverter(CheckConverter):
    Conf = conf.ExpectConf
    conf: conf.ExpectConf


class RegexConverter(Converter):
    Conf = conf.RegexConf
    conf: conf.RegexConf

    def check(self, spark: SparkSession) -> None:
        compile_regex(spark, self.conf.pattern, key=f"{self.key}.pattern", what=f"converter `{self.step}`")

    def _apply(self, frame: DataFrame) -> DataFrame:
        c = self.conf
        matches = _col(c.column).rlike(f"^(?:{c.pattern})$")
        why = c.reason or f"`{c.column}` does not match {c.pattern}"
        return self.flag(frame, _col(c.column).isNotNull() & ~matches, reason=why)


class ParseTimestampConverter(Converter):
    Conf = conf.ParseTimestampConf
    conf: conf.ParseTimestampConf

    def check(self, spark: SparkSession) -> None:
        if self.conf.format:
            check_datetime_pattern(spark, self.conf.format, key=f"{self.key}.format", what=f"converter `{self.step}`")

    def _apply(self, frame: DataFrame) -> DataFrame:
        c = self.conf
        source = _col(c.column)
        parsed = F.try_to_timestamp(source, F.lit(c.format)) if c.format else F.try_to_timestamp(source)
        fmt = c.format or "ISO-8601"
        why = F.concat(
            F.lit(f"cannot parse `{c.column}` value '"), _shown(c.column), F.lit(f"' as a timestamp ({fmt})")
        )
        frame = self.flag(frame, source.isNotNull() & parsed.isNull(), reason=why)
        return frame.withColumn(c.target or c.column, parsed)


class DedupeConverter(Converter):
    """Numbers the valid records of each key in ``order_by`` order and keeps the first."""

    Conf = conf.DedupeConf
    conf: conf.DedupeConf

    def _apply(self, frame: DataFrame) -> DataFrame:
        c = self.conf
        order = [sort_column(o) for o in c.order_by] or [_col(k) for k in c.keys]
        window = Window.partitionBy(*[_col(k) for k in c.keys], is_rejected()).orderBy(*order)
        duplicate = (F.row_number().over(window) > 1) & ~is_rejected()
        if c.on_duplicate == "drop":
            return frame.withColumn(DROPPED, F.col(DROPPED) | duplicate)
        keys = ", ".join(c.keys)
        return reject(frame, duplicate, step=self.step, reason=f"duplicate of an earlier record with the same ({keys})")


def sort_column(text: str) -> Column:
    expr, descending, nulls = conf.split_sort_order(text)
    return ordered(F.expr(expr), descending, nulls)


def ordered(column: Column, descending: bool, nulls: str | None) -> Column:
    """``column`` as a sort order: descending or not, nulls ``first``, ``last`` or Spark's default."""
    if descending:
        return column.desc_nulls_first() if nulls == "first" else column.desc_nulls_last() if nulls else column.desc()
    return column.asc_nulls_last() if nulls == "last" else column.asc_nulls_first() if nulls else column.asc()


__all__ = [
    "ERRORS",
    "CastConverter",
    "CheckConverter",
    "DedupeConverter",
    "DeriveConverter",
    "DropConverter",
    "ExpectConverter",
    "ParseTimestampConverter",
    "RegexConverter",
    "RenameConverter",
    "RequireConverter",
    "SelectConverter",
]
