"""Checks of what a user writes in a step or a fork that Spark's analysis lets through.

Analysis over an empty frame catches unknown columns and SQL that does not parse, but not a
non-boolean condition (Spark would cast ``arr_delay >> 60`` to boolean and keep every non-zero
row), a regex that does not compile or a datetime pattern Spark refuses (both only fail once a
task evaluates them, on the executors). Each check here runs on the driver, starts no Spark job,
and raises a :class:`~engine.errors.ConfigError` naming the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from engine.converters.base import first_line
from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_JVM_ERRORS = (PySparkException, Py4JJavaError)
"""What a py4j call raises: PySpark converts most JVM exceptions into its own."""


def boolean(frame: DataFrame, sql: str, *, key: str, what: str) -> Column:
    """``sql`` as a column over ``frame``; a :class:`ConfigError` unless it is boolean.

    Spark's analysis errors (an unknown column) are left to the caller, which knows the step."""
    column = F.expr(sql)
    found = frame.select(column).schema.fields[0].dataType
    if not isinstance(found, BooleanType):
        raise ConfigError(
            f"{what}: `{sql}` is of type {found.simpleString()}, not boolean; "
            "write a condition (a comparison, a test), which Spark will not cast",
            key=key,
        )
    return column


def compile_regex(spark: SparkSession, pattern: str, *, key: str, what: str) -> None:
    """A :class:`ConfigError` unless Java compiles ``pattern`` and ``^(?:pattern)$`` (what a
    whole-value match runs): an unbalanced ``)`` could otherwise escape the group."""
    compile_ = spark._jvm.java.util.regex.Pattern.compile  # type: ignore[union-attr]
    whole = f"^(?:{pattern})$"
    for text, as_ in ((pattern, ""), (whole, f" as the whole-value match {whole!r}")):
        try:
            compile_(text)
        except _JVM_ERRORS as exc:
            raise ConfigError(
                f"{what}: the regular expression {pattern!r} does not compile{as_}: {_java_message(exc)}", key=key
            ) from exc


def check_datetime_pattern(spark: SparkSession, pattern: str, *, key: str, what: str) -> None:
    """A :class:`ConfigError` if Spark refuses ``pattern`` for parsing timestamps.

    Spark builds the formatter only when a task first evaluates it; constant folding a parse of a
    literal makes the optimizer build it on the driver, under the session's own
    ``spark.sql.legacy.timeParserPolicy``, without running a job."""
    probe = spark.range(1).select(F.try_to_timestamp(F.lit("2000-01-01"), F.lit(pattern)))
    try:
        probe._jdf.queryExecution().optimizedPlan()
    except _JVM_ERRORS as exc:
        raise ConfigError(
            f"{what}: Spark refuses the datetime pattern {pattern!r}: {_java_message(exc)}", key=key
        ) from exc


def _java_message(exc: Exception) -> str:
    """The JVM's message on one line: its first line, and the second when the first only
    announces it (Spark's upgrade notes, Java's regex errors show the pattern there)."""
    text = exc.java_exception.getMessage() if isinstance(exc, Py4JJavaError) else str(exc)
    lines = [line.strip() for line in str(text or first_line(exc)).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else type(exc).__name__
