"""The JVM's temporary folder follows ``TMPDIR``, as every other program of a run does.

Java ignores ``TMPDIR``: ``java.io.tmpdir`` is ``/tmp`` on Linux whatever the environment says. A
driver JVM writes there what it cannot take with it when it is killed: Spark's ``spark-*`` folders
(a copy of the job's jars and the engine zip), ``blockmgr-*`` and ``artifacts-*``, and the native
libraries snappy and lz4 unpack on each start. So a user (or a test run, ``scripts/test.sh``) who
points ``TMPDIR`` at a scratch disk of its own finds those in ``/tmp`` anyway, and a machine that
runs jobs that die fills its ``/tmp``. With this option the driver (and, through
``spark.local.dir``'s default, every local-mode executor) writes under ``TMPDIR`` instead.
Hadoop has a temp folder of its own, ``hadoop.tmp.dir`` (``/tmp/hadoop-<user>``, whatever Java
says), where S3A buffers its uploads: :func:`hadoop_temp_settings` moves it under ``TMPDIR`` too.

Off switch: ``ENGINE_JVM_TMPDIR=off`` (the JVM keeps its own default); an unset ``TMPDIR``, or one
whose path holds a space (spark-submit splits ``--driver-java-options`` at spaces), changes nothing.
"""

from __future__ import annotations

import os

__all__ = ["hadoop_temp_settings", "java_tmpdir_options"]


def _temp_folder() -> str | None:
    folder = os.environ.get("TMPDIR", "")
    if os.environ.get("ENGINE_JVM_TMPDIR", "on") == "off" or not folder or not os.path.isdir(folder):
        return None
    return os.path.abspath(folder)


def java_tmpdir_options() -> list[str]:
    """``-Djava.io.tmpdir=<TMPDIR>`` when ``TMPDIR`` names a folder (and the switch is on), else nothing."""
    folder = _temp_folder()
    if folder is None or any(c.isspace() for c in folder):
        return []
    return [f"-Djava.io.tmpdir={folder}"]


def hadoop_temp_settings() -> dict[str, str]:
    """Spark settings putting Hadoop's ``hadoop.tmp.dir`` under ``TMPDIR`` (when it names a folder and
    the switch is on), else none; a job's own ``spark.hadoop.hadoop.tmp.dir`` still wins."""
    folder = _temp_folder()
    if folder is None:
        return {}
    user = os.environ.get("USER") or str(os.getuid())
    return {"spark.hadoop.hadoop.tmp.dir": os.path.join(folder, f"hadoop-{user}")}
