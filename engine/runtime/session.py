"""The one place that builds the SparkSession.

Under ``spark-submit`` the JVM already exists, sized by ``spark-submit.sh`` (driver memory, jars):
settings given here that shape the JVM are ignored, so they are passed there. In tests and
benchmarks this module starts the JVM itself and puts the cached jars on its classpath.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from pyspark.sql import SparkSession

from engine.platform.jvm_temp import hadoop_temp_settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.spec.model import PoolConf

_DELTA = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # A run persists its converted records once, for its own sinks, and drops them when it ends:
    # encoding each cached column (Spark tries every scheme on every batch) cost more than the disk
    # it saves (bench/apply_changes_vs_handwritten.py, A/B: ~0.2 s of a 3.5 s run at 200k events).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # PySpark 4 records the Python call site of every column function for the error messages of
    # the expressions it builds: several JVM round trips and a stack walk a call, while the engine
    # builds its chain, its forks and its commits. The call sites would name the engine's own code,
    # never a user's config (whose errors name its keys); the chain built ~0.1 s faster a run.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def spark_warehouse() -> str:
    """Where Spark's catalog keeps managed tables: a directory of the engine's in the temp dir.
    The engine names every table by its path and creates none there, but Spark makes the directory
    when its catalog starts (Delta's catalog starts it); by default that is ``spark-warehouse/`` in
    the caller's working directory. ``spark.conf."spark.sql.warehouse.dir"`` still chooses another."""
    user = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return str(Path(tempfile.gettempdir()) / f"engine-spark-warehouse-{user}")


def cached_jars(repo_root: Path | None = None) -> list[str]:
    """The jars ``scripts/bootstrap.sh`` resolved into ``.cache/jars``."""
    root = repo_root or Path(__file__).resolve().parents[2]
    return sorted(str(p) for p in (root / ".cache" / "jars").glob("*.jar"))


def cached_class_path(repo_root: Path | None = None) -> list[str]:
    """The jars ``scripts/bootstrap.sh`` resolved into ``.cache/classpath``: the S3 connector and
    its SDK, which go on the JVMs' class path at start rather than through ``spark.jars``."""
    root = repo_root or Path(__file__).resolve().parents[2]
    return sorted(str(p) for p in (root / ".cache" / "classpath").glob("*.jar"))


def build_session(
    app_name: str,
    conf: dict[str, Any] | None = None,
    *,
    master: str | None = None,
    jars: list[str] | None = None,
    class_path: list[str] | None = None,
) -> SparkSession:
    """Get or create the application's SparkSession with Delta enabled. ``jars`` are shipped
    (``spark.jars``); ``class_path`` is put on the class path of the driver JVM this starts and of
    the executors (the same paths on every machine)."""
    builder = SparkSession.builder.appName(app_name)
    if master:  # under spark-submit the master comes from its command line: leave it unset
        builder = builder.master(master)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if class_path:
        for side in ("driver", "executor"):
            builder = builder.config(f"spark.{side}.extraClassPath", os.pathsep.join(class_path))
    # S3A's upload buffers and Hadoop's scratch under TMPDIR, not /tmp; in local mode only (the
    # setting travels to executors, whose machines have folders of their own)
    temp = hadoop_temp_settings() if _local(master) else {}
    settings = {**_DEFAULTS, "spark.sql.warehouse.dir": spark_warehouse(), **temp, **_DELTA, **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    # Delta registers its settings when its config object first loads: until then Spark calls them
    # unmodifiable, and a job's `spark.conf` Delta settings would be dropped by run_session.
    spark._jvm.org.apache.spark.sql.delta.sources.DeltaSQLConf.DELTA_SNAPSHOT_PARTITIONS()  # type: ignore[union-attr]
    _size_snapshots(spark)
    _object_store_settings(spark)
    spark.sparkContext.setLogLevel(os.environ.get("ENGINE_SPARK_LOG_LEVEL", "WARN"))
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # PySpark logs every analysis error it raises, plan and JVM stack included; the engine turns
    # those errors into one-line messages itself.
    # (Disabled, a logger is never called: PySpark's calls pass keywords a plain logger refuses.)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return spark


SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def _local(master: str | None) -> bool:
    """Whether the application runs in local mode (``master``, else what spark-submit was given)."""
    if master is None:
        from pyspark import SparkConf

        master = SparkConf().get("spark.master", "local[*]")
    return str(master).startswith("local")


def _object_store_settings(session: SparkSession) -> None:
    """What the standard ``AWS_*`` variables imply for S3A and S3A does not read itself (the
    endpoint of an S3-compatible server, the region), unless the user set it (``spark.hadoop.*``)."""
    from engine.storage.options import hadoop_settings

    hadoop = session.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in hadoop_settings().items():
        if hadoop.get(key) is None:
            hadoop.set(key, value)


def object_store_settings(session: SparkSession, settings: dict[str, str]) -> None:
    """Set a run's object-store connections (S3A's per-bucket keys, secrets included) on the
    application's Hadoop configuration, not in Spark's: nothing shows in the UI's environment tab
    or the event log. File systems opened earlier in the application keep what they had."""
    hadoop = session.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in settings.items():
        hadoop.set(key, value)


def _size_snapshots(session: SparkSession) -> None:
    """Build Delta snapshots with as many tasks as the application has cores, at most Delta's 50,
    unless the user chose. Delta's 50 suit a large table on a cluster; the engine reads small ones
    on every run (its metadata, the error table), where 50 tasks on two cores cost seconds each."""
    explicit = session.sparkContext.getConf().get(SNAPSHOT_PARTITIONS)
    if explicit is None and session.conf.get(SNAPSHOT_PARTITIONS, None) is None:
        session.conf.set(SNAPSHOT_PARTITIONS, str(min(50, max(1, session.sparkContext.defaultParallelism))))


def fair_pools(pools: dict[str, PoolConf]) -> dict[str, str]:
    """Session settings for FAIR scheduling with ``pools`` (an allocation file written to a temp
    file). Read when the SparkContext starts: pools of a later run in the same application (a
    multirun) that the first did not declare get Spark's defaults (weight 1)."""
    if not pools:
        return {"spark.scheduler.mode": "FAIR"}
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    for name, pool in sorted(pools.items()):
        lines += [
            f"  <pool name={quoteattr(name)}>",
            "    <schedulingMode>FIFO</schedulingMode>",
            f"    <weight>{pool.weight}</weight>",
            f"    <minShare>{pool.min_share}</minShare>",
            "  </pool>",
        ]
    lines.append("</allocations>")
    fd, path = tempfile.mkstemp(prefix="engine-pools-", suffix=".xml")
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": path}


def child_session(parent: SparkSession) -> SparkSession:
    """A session of ``parent``'s application that starts with ``parent``'s SQL settings (the run's
    ``spark.conf``) and keeps its own from then on, temporary views included. ``newSession()``
    would start from the application's settings alone and drop the run's."""
    return SparkSession(parent.sparkContext, parent._jsparkSession.cloneSession())  # type: ignore[attr-defined]


def run_session(root: SparkSession, conf: dict[str, Any] | None = None) -> SparkSession:
    """A new SQL session of ``root``'s application for one run, with the run's SQL settings: runs
    of a multirun share the SparkContext, never each other's settings. Settings fixed when the
    context started (master, memory, static SQL settings) are left to the first run's."""
    session = root.newSession()
    _size_snapshots(session)
    for key, value in (conf or {}).items():
        try:
            if not session.conf.isModifiable(key):
                if str(root.sparkContext.getConf().get(key, str(value))) != str(value):
                    log.warning("spark setting %s=%s ignored: it is fixed when the application starts", key, value)
                continue
            session.conf.set(key, str(value))
        except Exception as exc:  # a setting Spark refuses is reported, not fatal
            log.warning("spark setting %s=%s ignored: %s", key, value, str(exc).splitlines()[0])
    return session
