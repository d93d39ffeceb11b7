"""The one place that builds the SparkSession.

Under ``spark-submit`` the JVM already exists, sized by ``spark-submit.sh`` (driver memory, jars):
settings given here that shape the JVM are ignored, so they are passed there. In tests and
benchmarks this module starts the JVM itself and puts the cached jars on its classpath.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

_DELTA = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
}


def cached_jars(repo_root: Path | None = None) -> list[str]:
    """The jars ``scripts/bootstrap.sh`` resolved into ``.cache/jars``."""
    root = repo_root or Path(__file__).resolve().parents[2]
    return sorted(str(p) for p in (root / ".cache" / "jars").glob("*.jar"))


def build_session(
    app_name: str, conf: dict[str, Any] | None = None, *, master: str | None = None, jars: list[str] | None = None
) -> SparkSession:
    """Get or create the application's SparkSession with Delta enabled."""
    builder = SparkSession.builder.appName(app_name)
    if master:  # under spark-submit the master comes from its command line: leave it unset
        builder = builder.master(master)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in {**_DEFAULTS, **_DELTA, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("ENGINE_SPARK_LOG_LEVEL", "WARN"))
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # PySpark logs every analysis error it raises, plan and JVM stack included; the engine turns
    # those errors into one-line messages itself.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark
