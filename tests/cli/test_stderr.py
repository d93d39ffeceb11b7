"""The driver's stderr handed to the JVM's (engine/cli/stderr.py), on a real py4j gateway."""

from __future__ import annotations

import io
from typing import Any

from engine.cli.stderr import JvmStderr


def test_text_reaches_a_java_print_stream_as_utf8(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    buffer = jvm.java.io.ByteArrayOutputStream()
    stream = JvmStderr(jvm.java.io.PrintStream(buffer, True, "UTF-8"), io.StringIO())
    stream.write("dag café: running\n")
    stream.write("")
    stream.flush()
    assert buffer.toString("UTF-8") == "dag café: running\n"


def test_a_stream_the_jvm_no_longer_takes_falls_back_to_the_original(spark: Any) -> None:
    fallback = io.StringIO()
    stream = JvmStderr(spark.sparkContext._jvm.java.lang.Object(), fallback)  # has no write(byte[], int, int)
    stream.write("first\n")
    stream.write("second\n")
    stream.flush()
    assert fallback.getvalue() == "first\nsecond\n"
