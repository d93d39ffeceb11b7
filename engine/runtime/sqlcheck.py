"""Parse Spark SQL expressions with Spark's own parser, without running a Spark job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException

from engine.converters.base import first_line
from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_parses(spark: SparkSession, sql: str, *, key: str) -> None:
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        parser.parseExpression(sql)
    except (AnalysisException, Py4JJavaError) as exc:  # PySpark converts the JVM's ParseException
        message = first_line(exc.java_exception.getMessage() if isinstance(exc, Py4JJavaError) else exc)
        raise ConfigError(f"SQL expression does not parse: {sql!r}: {message}", key=key) from exc
