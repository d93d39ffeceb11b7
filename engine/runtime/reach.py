"""Whether a cluster's executors see the driver's local warehouse.

On a cluster (any master but ``local``) executors write the Delta sinks, the file sinks and the
error tables, and the driver commits what they wrote. With the warehouse on a disk only the driver
has, each executor writes into a directory of the same name on its own machine, and the driver then
commits files it cannot see: a table readable nowhere, discovered long after the run. So before
anything is planned the driver writes a probe file into the warehouse and a small Spark job (a few
tasks, spread over the executors the cluster has given) looks for it; any executor that does not
see it is a config error (exit 2) naming the warehouse and the hosts. Local mode, and a warehouse
on HDFS or an object store, cost nothing.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.storage.paths import StoragePath

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PROBE_DIR", "check_executors_see"]

PROBE_DIR = "_engine/probes"
"""Below the warehouse: each run's probe file, removed as soon as the executors have looked."""


def check_executors_see(spark: SparkSession, warehouse: str) -> None:
    """Raise a :class:`ConfigError` if, on a cluster, an executor does not see the driver's local
    ``warehouse``; nothing when the master is local or the warehouse is not on a local disk."""
    local = StoragePath.parse(warehouse).local
    if local is None or (spark.sparkContext.master or "local").startswith("local"):
        return
    folder = os.path.join(local, PROBE_DIR)
    os.makedirs(folder, exist_ok=True)
    token = uuid.uuid4().hex
    probe = os.path.join(folder, token)
    with open(probe, "w", encoding="utf-8") as out:
        out.write(token)
    try:
        blind = _blind_hosts(spark, probe, token)
    finally:
        os.remove(probe)
        with contextlib.suppress(OSError):  # another run's probe is there
            os.rmdir(folder)
    if blind:
        raise ConfigError(
            f"the warehouse {warehouse} is on the driver's local disk, and the executors on "
            f"{', '.join(blind)} cannot see it (a file the driver wrote there was not there for them). "
            "On a cluster, executors write the sinks and error tables the driver then commits: put the "
            "warehouse, and every sink path, where every executor sees the same files (a shared mount, "
            "HDFS, or an object store: warehouse=s3a://bucket/prefix). Nothing was written",
            key="warehouse",
        )


def _blind_hosts(spark: SparkSession, probe: str, token: str) -> list[str]:
    """The hosts whose tasks did not find ``probe`` holding ``token``."""

    def look(_: int) -> tuple[str, bool]:  # on an executor: stdlib only, pickled by value
        import socket

        try:
            with open(probe, encoding="utf-8") as found:
                seen = found.read() == token
        except OSError:
            seen = False
        return socket.gethostname(), seen

    context = spark.sparkContext
    tasks = max(2, context.defaultParallelism) * 2
    answers = context.parallelize(range(tasks), tasks).map(look).collect()
    return sorted({host for host, seen in answers if not seen})
