"""``main.py`` calls :func:`main`. Exit codes: 0 ok, 1 a job failed, 2 config or usage error,
3 another run of the same job holds its lease (nothing was done), 128 + N stopped by signal N
(130 SIGINT, 143 SIGTERM; nothing half-done was published).

The last line on stdout is always a one-line JSON summary of the run (of every run, for a
multirun); logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, NoReturn

from engine import hooks
from engine.cli.progress import hop_table, table
from engine.cli.signals import graceful_stop
from engine.cli.sparklog import route_spark_log, spark_log_note
from engine.config import AppConfig, run_app
from engine.config.app import say_refused
from engine.config.connections import with_connections
from engine.config.secrets import Secrets, key_command
from engine.errors import (
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_SIGNALLED,
    ConfigError,
    EngineError,
    JobBusyError,
    UnreachableError,
)
from engine.runtime.stop import Stop
from engine.state.status import Status, multirun_outcome

log = logging.getLogger("engine")


def main(argv: list[str] | None = None) -> NoReturn:
    args = sys.argv[1:] if argv is None else argv
    if (done := key_command(args)) is not None:  # mode=new_key, mode=encrypt: no job, no Spark
        sys.exit(done)
    runs: list[dict[str, Any]] = []
    refused: list[ConfigError] = []

    def refuse(error: ConfigError) -> None:
        say_refused(error)
        refused.append(error)

    with graceful_stop(Stop()) as stop:

        def task(app: AppConfig) -> int:
            def keep(code: int, summary: dict[str, Any]) -> None:
                runs.append({"overrides": list(app.overrides), **summary, "exit_code": code} if app.multirun else {})

            return run_task(app, stop, on_summary=keep)

        code = compose_and_run(args, task, on_refused=refuse)
    if code and not runs:  # the command line or the config was refused, as stderr says
        message = str(refused[-1]) if refused else "the command line could not be read (see the message above)"
        print(json.dumps({"status": Status.CONFIG_ERROR, "message": message}), flush=True)
    elif len(runs) > 1 or any(runs):
        print(json.dumps(multirun_summary(runs), default=str), flush=True)
    sys.exit(code)


def compose_and_run(
    argv: list[str], task: Callable[[AppConfig], int], *, on_refused: Callable[[ConfigError], None] = say_refused
) -> int:
    """Hydra composes each run of ``argv`` for ``task``; every documented key of the job's
    plugins can be overridden as ``key=value``, set in the job file or not. What cannot be
    composed goes to ``on_refused``, one config error each (by default: one line on stderr)."""
    from engine.spec.documented import documented_defaults  # no JVM: plugin configs only

    return run_app(argv, task, documented=documented_defaults, on_refused=on_refused)


def multirun_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The last line of a multirun: every run, in order, without its per-DAG detail."""
    return {
        "status": multirun_outcome(r.get("status") for r in runs),
        "runs": [{k: v for k, v in r.items() if k != "dags"} for r in runs],
        "failed_runs": sum(1 for r in runs if r.get("exit_code")),
    }


def run_task(
    app: AppConfig, stop: Stop | None = None, *, on_summary: Callable[[int, dict[str, Any]], None] | None = None
) -> int:
    """One composed run: compile, start Spark, validate or run, print the summary; the exit code."""
    debug = app.data.get("debug") is True  # `debug=loud` is refused by the config check, not taken as on
    json_logs = app.data.get("logs") == "json"
    _configure_logging(debug, json_logs=json_logs)
    started = time.monotonic()
    run_id = os.environ.pop(RUN_ID_ENV, "") or new_run_id()  # taken once: not by a multirun's next run, nor a hop
    job = app.job_choice or (f"flow.{app.flow_choice.replace('/', '.')}" if app.flow_choice else "?")
    spark_log = route_spark_log(job, run_id, debug=debug)  # Spark's stack traces: there, not on stderr
    stop = stop or Stop()
    secrets = Secrets()
    used: dict[str, str] = {}  # the node that names a connection: the connection, for messages
    with secrets.masking_logs():
        try:
            ready = with_connections(app.data, secrets=secrets, used=used)  # a connection's ENC(...) too
            app = replace(app, data=secrets.reveal(ready))  # then the job's
            summary, code = _outcome(app, run_id, job, stop, secrets)
        except Exception as exc:  # an unexpected failure too ends in one message and a summary
            if isinstance(exc, UnreachableError):
                exc.through(used)
            summary, code = _failure(exc, app, run_id, job, debug, secrets)
    summary = secrets.mask(summary)
    summary["seconds"] = round(time.monotonic() - started, 3)  # the whole run: Spark start-up included
    if (note := spark_log_note(spark_log)) is not None:
        log.info("%s", note)
    if app.data.get("progress") != "off" and not json_logs:
        if summary.get("dags") and isinstance(summary["dags"][0], dict):
            print(table(summary), flush=True)
        elif summary.get("hops") and isinstance(summary["hops"][0], dict) and "jobName" in summary["hops"][0]:
            print(hop_table(summary), flush=True)
    print(json.dumps(summary, default=str), flush=True)
    _push_metrics(app, summary)
    if on_summary is not None:
        on_summary(code, summary)
    return code


RUN_ID_ENV = "ENGINE_RUN_ID"
"""The run id of the next run of this process (the flow service names a flow's execution so)."""


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _outcome(app: AppConfig, run_id: str, job: str, stop: Stop, secrets: Secrets) -> tuple[dict[str, Any], int]:
    """The summary of a run that raised nothing, and its exit code."""
    if stop.is_set():  # a multirun asked to stop starts no further run
        summary = {"run_id": run_id, "job": job, "status": Status.CANCELLED, "message": stop.reason}
    else:
        with hooks.installed(hooks.Hooks.from_env()):  # kill points and faults a drill asks for
            summary = _execute(app, run_id, stop, secrets)
    code = EXIT_OK if Status.of(summary["status"]).ok else EXIT_JOB_FAILED
    if summary["status"] == Status.CANCELLED:
        code = EXIT_SIGNALLED + (stop.signum or 15)
    return summary, code


def _failure(
    exc: Exception, app: AppConfig, run_id: str, job: str, debug: bool, secrets: Secrets
) -> tuple[dict[str, Any], int]:
    """The summary of a run that raised ``exc`` (reported on stderr, masked), and its exit code."""
    if isinstance(exc, ConfigError) and _in_job(exc.key):
        exc.in_file(app.job_file or app.flow_file)
    _report(exc, debug, secrets)
    if not isinstance(exc, EngineError):
        first = str(exc).strip().splitlines()[0]
        return {"run_id": run_id, "job": job, "status": Status.FAILED, "message": first}, EXIT_JOB_FAILED
    status = (
        Status.CONFIG_ERROR
        if isinstance(exc, ConfigError)
        else Status.BUSY
        if isinstance(exc, JobBusyError)
        else Status.FAILED
    )
    return {"run_id": run_id, "job": job, "status": status, "message": str(exc)}, exc.exit_code


def _in_job(key: str | None) -> bool:
    """Whether a config error's key is the job's or the flow's, so their file is where to fix it;
    ``warehouse``, ``lease.ttl_seconds``, ... come from the config tree or the command line."""
    return key is None or key.split(".", 1)[0].split("[", 1)[0] in ("job", "flow")


def _execute(app: AppConfig, run_id: str, stop: Stop, secrets: Secrets) -> dict[str, Any]:
    """The run's mode, by its handler (:data:`engine.cli.modes.HANDLERS`); a flow's hops are
    readied as the job of a run is (named connections filled in, secrets decrypted)."""
    from engine.cli.modes import execute
    from engine.spec.app import app_conf

    def prepare(job: dict[str, Any]) -> dict[str, Any]:
        ready = secrets.reveal(with_connections({"job": job}, secrets=secrets))["job"]
        assert isinstance(ready, dict)
        return ready

    conf = app_conf(app.data)
    if conf.flow is not None:
        from engine.cli.flows import execute_flow

        return execute_flow(app, conf, run_id, stop, secrets.mask, prepare)
    return execute(app, conf, run_id, stop, secrets.mask)


def _report(exc: BaseException, debug: bool, secrets: Secrets) -> None:
    if debug:
        print(secrets.mask("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
    kind = "config error" if isinstance(exc, ConfigError) else "error"
    print(secrets.mask(f"{kind}: {exc}"), file=sys.stderr, flush=True)


def _push_metrics(app: AppConfig, summary: dict[str, Any]) -> None:
    """The run's metrics, where ``metrics`` says (a run mode's summary only: not a validation's)."""
    from pydantic import ValidationError

    from engine.cli.runmetrics import push_metrics
    from engine.spec.app import MetricsConf

    if app.data.get("mode", "run") != "run" or not isinstance(app.data.get("metrics"), dict):
        return
    try:
        conf = MetricsConf.model_validate(app.data["metrics"])
    except ValidationError:  # the run reported it as a config error
        return
    push_metrics(conf, summary)


def _configure_logging(debug: bool, *, json_logs: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        stream=sys.stdout if json_logs else sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    if json_logs:
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLogFormatter())
    logging.captureWarnings(True)  # warnings too pass the run's log filters (secrets masked)
    for noisy in ("py4j", "urllib3", "openlineage"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log record: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message`` and, with an exception, ``error`` (its traceback under ``debug=true``)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
