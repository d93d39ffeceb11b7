"""Parse Spark SQL expressions with Spark's own parser, without running a Spark job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError

from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_parses(spark: SparkSession, sql: str, *, key: str) -> None:
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        parser.parseExpression(sql)
    except Py4JJavaError as exc:
        message = str(exc.java_exception.getMessage()).strip().splitlines()[0]
        raise ConfigError(f"SQL expression does not parse: {sql!r}: {message}", key=key) from exc
