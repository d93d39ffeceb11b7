"""Spark's own log lines of one run: stderr gets one line each, the run's log file their stack traces.

Under ``spark-submit.sh`` (and the ``engine`` command) the driver JVM logs through the engine's
``conf/log4j2.properties``: warnings and errors on stderr without stack traces, and the lines a
failed task makes Spark write (hundreds of lines of ``at org.apache...`` for a truncated gzip)
in a log file only, since the engine reports the failure itself, in one line. :func:`route_spark_log`
names that file for the run, ``<log dir>/<job>-<run id>.log`` (:func:`log_dir`), and with
``debug=true`` puts the stack traces back on stderr; :func:`spark_log_note` is the line that says
where the file is, once the run wrote to it. The file is made only when Spark logs a warning or an
error: a run without one leaves none.

In a session that does not use the engine's log configuration (a notebook, the test session),
nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["LOG_DIR_ENV", "log_dir", "route_spark_log", "spark_log_note"]

LOG_DIR_ENV = "ENGINE_LOG_DIR"
"""The folder of the runs' Spark log files; else ``$XDG_STATE_HOME/engine/logs`` (``~/.local/state/...``)."""
FILE_APPENDER = "engine_file"
"""The log file's appender in ``conf/log4j2.properties``: that it is there says the config is the engine's."""
_FILE, _CONSOLE, _TASKS = "engine.spark.log", "engine.spark.console", "engine.spark.tasks"
"""The system properties ``conf/log4j2.properties`` reads (see there)."""


def log_dir() -> Path:
    """Where the runs' Spark log files go: ``$ENGINE_LOG_DIR``, else the user's state folder."""
    env = os.environ.get(LOG_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "engine" / "logs"


def route_spark_log(job: str, run_id: str, *, debug: bool, jvm: Any = None) -> Path | None:
    """Point the driver JVM's log file at this run's and choose what stderr shows (``debug``:
    stack traces too); the file, or ``None`` when there is no JVM yet to ask or its log
    configuration is not the engine's. ``jvm``: the py4j JVM view (found under spark-submit)."""
    gateway = None if jvm is not None else _submitted_gateway()
    if gateway is not None:
        jvm = gateway.jvm
    if jvm is None:
        return None
    try:
        return _routed(jvm, job, run_id, debug)
    except Exception:  # logging is no reason to fail a run: Spark's defaults stay
        return None
    finally:
        if gateway is not None:
            gateway.close()  # this client's connection only; the JVM's gateway server stays


def _routed(jvm: Any, job: str, run_id: str, debug: bool) -> Path | None:
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    if context.getConfiguration().getAppender(FILE_APPENDER) is None:
        return None
    file = _run_file(job, run_id)
    system = jvm.java.lang.System
    system.setProperty(_FILE, str(file))
    system.setProperty(_CONSOLE, "engine_full" if debug else "engine_brief")
    system.setProperty(_TASKS, "engine_full" if debug else "engine_none")
    context.reconfigure()  # the file name and the appenders are read from the properties anew
    return file


def spark_log_note(file: Path | None) -> str | None:
    """The line that tells where the run's Spark log is, if the run wrote one."""
    if file is None or not file.is_file() or file.stat().st_size == 0:
        return None
    return f"Spark's warnings and errors of this run, with their stack traces: {file}"


def _run_file(job: str, run_id: str) -> Path:
    """``<log dir>/<job>-<run id>.log``, its folder made; the temporary folder's if that cannot be."""
    name = f"{job.replace('/', '.')}-{run_id}.log"
    folder = log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder / name
    except OSError:
        pass
    fallback = Path(os.environ.get("TMPDIR") or "/tmp") / f"engine-logs-{os.getuid()}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback / name


def _submitted_gateway() -> Any:
    """A client of the gateway of the spark-submit that started this driver (its port is in the
    environment), or ``None``."""
    port = os.environ.get("PYSPARK_GATEWAY_PORT")
    if not port:
        return None
    try:
        from py4j.java_gateway import GatewayParameters, JavaGateway

        parameters = GatewayParameters(port=int(port), auth_token=os.environ.get("PYSPARK_GATEWAY_SECRET"))
        return JavaGateway(gateway_parameters=parameters)
    except Exception:
        return None
