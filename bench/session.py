"""The one local SparkSession every benchmark starts, the same way (and the same as the tests)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def start_spark(app: str = "bench", conf: dict[str, str] | None = None) -> SparkSession:
    """``local[2]``, a 4 GiB driver (set before the JVM starts), 8 shuffle partitions, Delta on."""
    os.environ["PYSPARK_SUBMIT_ARGS"] = "--driver-memory 4g pyspark-shell"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from engine.runtime.session import build_session, cached_class_path, cached_jars

    jars = cached_jars()
    if not jars:
        sys.exit("no jars in .cache/jars: run `bash scripts/bootstrap.sh` first")
    return build_session(
        app,
        {"spark.sql.shuffle.partitions": "8", **(conf or {})},
        master="local[2]",
        jars=jars,
        class_path=cached_class_path(),
    )
