"""The session's JVM through py4j, in as few round trips as it takes.

py4j resolves each step of a dotted name with a round trip to the JVM (``jvm.org.apache.hadoop.fs.Path``
is five before the constructor's own call), and walks a Java map two round trips an entry, ending on
an exception that PySpark then converts. :class:`~engine.storage.hadoop.HadoopFs` paid the first on
every path operation and the chain check's key the second on every run: together a sixth of an
in-process run of a small job (issue 75)."""

from __future__ import annotations

import functools
import json
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["java_class", "session_settings"]

_KNOWN: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def java_class(jvm: Any, name: str) -> Any:
    """The Java class (or Scala object's class, ``scala.Option``) ``name`` of a py4j JVM view,
    looked up once per JVM view."""
    known = _KNOWN.setdefault(jvm, {})
    found = known.get(name)
    if found is None:
        found = known[name] = functools.reduce(getattr, name.split("."), jvm)
    return found


def session_settings(spark: SparkSession) -> dict[str, str]:
    """Every setting of the session's SQL conf, as ``spark.conf.getAll`` gives them, in one call
    (the map as JSON, written in the JVM)."""
    every = spark.conf._jconf.getAllAsJava()  # type: ignore[attr-defined]
    mapper = java_class(spark.sparkContext._jvm, "com.fasterxml.jackson.databind.ObjectMapper")
    return dict(json.loads(mapper().writeValueAsString(every)))
