"""``main.py`` calls :func:`main`. Exit codes: 0 ok, 1 a job failed, 2 config or usage error,
3 another run of the same job holds its lease (nothing was done), 128 + N stopped by signal N
(130 SIGINT, 143 SIGTERM; nothing half-done was published).

The last line on stdout is always a one-line JSON summary of the run (of every run, for a
multirun); logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

from engine.cli.progress import MODES as PROGRESS_MODES
from engine.cli.progress import shown, table
from engine.cli.signals import graceful_stop
from engine.config import AppConfig, run_app
from engine.errors import EXIT_JOB_FAILED, EXIT_OK, EXIT_SIGNALLED, ConfigError, EngineError, JobBusyError
from engine.runtime.progress import Board
from engine.runtime.stop import Stop
from engine.state.status import Status, multirun_outcome

log = logging.getLogger("engine")
MODES = ("run", "validate", "status", "checkpoint", "commit")


def main(argv: list[str] | None = None) -> NoReturn:
    runs: list[dict[str, Any]] = []
    with graceful_stop(Stop()) as stop:

        def task(app: AppConfig) -> int:
            def keep(code: int, summary: dict[str, Any]) -> None:
                runs.append({"overrides": list(app.overrides), **summary, "exit_code": code} if app.multirun else {})

            return run_task(app, stop, on_summary=keep)

        code = compose_and_run(sys.argv[1:] if argv is None else argv, task)
    if code and not runs:  # Hydra refused the command line and has said why on stderr
        message = "the command line or the config could not be composed (see the message above)"
        print(json.dumps({"status": "CONFIG_ERROR", "message": message}), flush=True)
    elif len(runs) > 1 or any(runs):
        print(json.dumps(multirun_summary(runs), default=str), flush=True)
    sys.exit(code)


def compose_and_run(argv: list[str], task: Callable[[AppConfig], int]) -> int:
    """Hydra composes each run of ``argv`` for ``task``; every documented key of the job's
    plugins can be overridden as ``key=value``, set in the job file or not."""
    from engine.spec.documented import documented_defaults  # no JVM: plugin configs only

    return run_app(argv, task, documented=documented_defaults)


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
    debug = bool(app.data.get("debug"))
    _configure_logging(debug)
    started = time.monotonic()
    run_id = new_run_id()
    job = app.job_choice or "?"
    stop = stop or Stop()
    summary: dict[str, Any]
    try:
        if stop.is_set():  # a multirun asked to stop starts no further run
            summary = {"run_id": run_id, "job": job, "status": "CANCELLED", "message": stop.reason}
        else:
            summary = _execute(app, run_id, stop)
        code = EXIT_OK if Status.of(summary["status"]).ok else EXIT_JOB_FAILED
        if summary["status"] == "CANCELLED":
            code = EXIT_SIGNALLED + (stop.signum or 15)
    except EngineError as exc:
        if isinstance(exc, ConfigError):
            exc.in_file(app.job_file)
        _report(exc, debug)
        summary = {
            "run_id": run_id,
            "job": job,
            "status": "CONFIG_ERROR"
            if isinstance(exc, ConfigError)
            else "BUSY"
            if isinstance(exc, JobBusyError)
            else "FAILED",
            "message": str(exc),
        }
        code = exc.exit_code
    except Exception as exc:  # an unexpected failure still ends in one message and a summary
        _report(exc, debug)
        summary = {"run_id": run_id, "job": job, "status": "FAILED", "message": str(exc).strip().splitlines()[0]}
        code = EXIT_JOB_FAILED
    summary["seconds"] = round(time.monotonic() - started, 3)  # the whole run: Spark start-up included
    if summary.get("dags") and isinstance(summary["dags"][0], dict) and app.data.get("progress") != "off":
        print(table(summary), flush=True)
    print(json.dumps(summary, default=str), flush=True)
    if on_summary is not None:
        on_summary(code, summary)
    return code


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _execute(app: AppConfig, run_id: str, stop: Stop) -> dict[str, Any]:
    from engine.spec import compile_job  # no JVM needed up to here

    data = app.data
    mode = data.get("mode", "run")
    if mode not in MODES:
        raise ConfigError(f"unknown mode `{mode}`; use one of: {', '.join(MODES)}", key="mode")
    progress = str(data.get("progress", "auto"))
    if progress not in PROGRESS_MODES:
        raise ConfigError(
            f"unknown progress view `{progress}`; use one of: {', '.join(PROGRESS_MODES)}", key="progress"
        )
    warehouse = _absolute(str(data["warehouse"]))
    name = (app.job_choice or "job").replace("/", ".")
    spec = compile_job(data["job"], name=name, file=app.job_file, warehouse=warehouse)

    from engine.cli.status import status_report
    from engine.commit.lease import Lease
    from engine.runtime import JobManager, build_session
    from engine.runtime.discovery import discover
    from engine.runtime.session import fair_pools, run_session
    from engine.state.delta_runs import DeltaRunStore
    from engine.state.delta_store import DeltaMetadataStore

    spark_cfg = data.get("spark", {})
    conf = {**fair_pools(spec.pools), **spark_cfg.get("conf", {})}
    spark = run_session(build_session(spark_cfg.get("app_name", "engine"), conf), spark_cfg.get("conf", {}))
    if spec.discover is not None:
        found = discover(spark, spec.discover, file=app.job_file)
        spec = compile_job(data["job"], name=name, file=app.job_file, warehouse=warehouse, found=found)
    log.info("job %s compiled: %d dag(s); run %s", spec.name, len(spec.dags), run_id)
    if mode == "validate":
        JobManager(spark).validate(spec, run_id)
        return {"run_id": run_id, "job": spec.name, "status": "VALID", "dags": [d.name for d in spec.dags]}
    metadata = DeltaMetadataStore(spark, f"{warehouse}/_engine")
    lease = Lease(f"{warehouse}/_engine", spec.name, run_id=run_id, ttl_seconds=_lease_ttl(data))
    if mode == "status":
        return status_report(
            metadata, spec.name, runs=int(data.get("status", {}).get("runs", 5)), max_attempts=_attempts(spec)
        )
    if mode in ("checkpoint", "commit"):
        return _operate(mode, data, metadata, lease, spec, run_id, spark)
    store = DeltaRunStore(spark, f"{warehouse}/_engine/runs")  # opened meanwhile, created below
    with lease:  # one run of a job at a time (exit code 3 otherwise)
        manager = JobManager(spark, metadata, guard=lease.check)
        planned = manager.plan(spec, run_id)  # recovery, then every config mistake surfaces here
        metadata.ensure()
        store.ensure()
        board = Board()
        board.add([d.name for d in spec.dags])
        with shown(board, progress):
            return manager.execute(planned, store, stop=stop, board=board).summary()


def _operate(
    mode: str, data: dict[str, Any], metadata: Any, lease: Any, spec: Any, run_id: str, spark: Any
) -> dict[str, Any]:
    from engine.cli.commit_log import CommitRequest, commit_command
    from engine.cli.status import checkpoint
    from engine.state.checkpoints import CheckpointRequest

    raw = {k: (None if v is None else str(v)) for k, v in (data.get(mode) or {}).items()}
    given = {k: v for k, v in raw.items() if v is not None}
    if given.get("action", "show") == "show":
        if mode == "commit":
            return commit_command(metadata, spec.name, _attempts(spec), CommitRequest(**given), run_id=run_id)
        return checkpoint(
            metadata, spec.name, list(spec.dags), CheckpointRequest(**{"action": "show", **given}), run_id=run_id
        )
    with lease:  # changing state or the commit log while the job runs is refused (exit code 3)
        metadata.ensure()
        if mode == "commit":
            commit_req = CommitRequest(**given)
            return commit_command(
                metadata, spec.name, _attempts(spec), commit_req, run_id=f"commit-{run_id}", spark=spark
            )
        req = CheckpointRequest(**{"action": "show", **given})
        return checkpoint(metadata, spec.name, list(spec.dags), req, run_id=f"checkpoint-{run_id}")


def _attempts(spec: Any) -> dict[str, int]:
    return {d.name: d.publish.max_attempts for d in spec.dags}


def _lease_ttl(data: dict[str, Any]) -> float:
    raw = (data.get("lease") or {}).get("ttl_seconds", 600)
    try:
        ttl = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"`{raw}` is not a number of seconds", key="lease.ttl_seconds") from None
    if ttl < 5:
        raise ConfigError(f"a lease of {ttl:g}s is too short to renew; use 5 or more", key="lease.ttl_seconds")
    return ttl


def _absolute(path: str) -> str:
    return path if "://" in path else str(Path(path).resolve())


def _report(exc: BaseException, debug: bool) -> None:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    kind = "config error" if isinstance(exc, ConfigError) else "error"
    print(f"{kind}: {exc}", file=sys.stderr, flush=True)


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    for noisy in ("py4j", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
