"""Whether a cluster's executors see the driver's local warehouse.

On a cluster (any master but ``local``) executors write the Delta sinks, the file sinks and the
error tables, and the driver commits what they wrote. With the warehouse on a disk only the driver
has, each executor writes into a directory of the same name on its own machine, and the driver then
commits files it cannot see: a table readable nowhere, discovered long after the run. So before
anything is planned the driver writes a probe file into the warehouse and a small Spark job (a few
tasks, spread over the executors the cluster has given) looks for it; any executor that does not
see it is a config error (exit 2) naming the warehouse and the hosts. Only ``mode=run`` asks (the
modes that only read need no executor). Local mode, and a warehouse on HDFS or an object store,
cost nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.storage.paths import StoragePath

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PROBE_DIR", "PROBE_TIMEOUT", "check_executors_see"]

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 120.0
"""Seconds the probe waits for executors (dynamic allocation from zero, a full cluster)."""

PROBE_DIR = "_engine/probes"
"""Below the warehouse: each run's probe file, removed as soon as the executors have looked."""


def check_executors_see(spark: SparkSession, warehouse: str, *, timeout: float = PROBE_TIMEOUT) -> None:
    """Raise a :class:`ConfigError` if, on a cluster, an executor that runs one of the probe's tasks
    does not see the driver's local ``warehouse``; nothing when the master is local or the
    warehouse is not on a local disk. Best effort: executors the cluster adds later are not asked,
    and a probe that gets no executor within ``timeout`` seconds is cancelled with a warning."""
    local = StoragePath.parse(warehouse).local
    if local is None or (spark.sparkContext.master or "local").startswith("local"):
        return
    token = uuid.uuid4().hex
    folder = os.path.join(local, PROBE_DIR)
    probe = _write_probe(folder, token, warehouse)
    try:
        blind = _blind_hosts(spark, probe, token, timeout)
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


def _write_probe(folder: str, token: str, warehouse: str) -> str:
    """The probe file, holding ``token``; another run removing the (empty) folder meanwhile is
    retried, a warehouse the driver cannot write is a config error."""
    probe = os.path.join(folder, token)
    for attempt in range(3):
        try:
            os.makedirs(folder, exist_ok=True)
            with open(probe, "w", encoding="utf-8") as out:
                out.write(token)
            return probe
        except FileNotFoundError:
            if attempt == 2:
                raise
        except OSError as exc:
            raise ConfigError(f"cannot write into the warehouse {warehouse}: {exc}", key="warehouse") from exc
    raise AssertionError("unreachable")


def _blind_hosts(spark: SparkSession, probe: str, token: str, timeout: float) -> list[str]:
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
    group = f"engine-probe-{token}"
    answers: list[tuple[str, bool]] = []
    failed: list[BaseException] = []

    def collect() -> None:
        context.setJobGroup(group, "does every executor see the warehouse?", interruptOnCancel=True)
        try:
            answers.extend(context.parallelize(range(tasks), tasks).map(look).collect())
        except BaseException as exc:  # raised again on the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=collect, name="warehouse-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        context.cancelJobGroup(group)
        log.warning("no executor ran the warehouse probe within %.0fs: not checked whether they see it", timeout)
        return []
    if failed:
        raise failed[0]
    return sorted({host for host, seen in answers if not seen})
