"""Executions of flows: each is the command an outside scheduler would run,
``spark-submit.sh flow=<group>/<name> mode=run``, as a subprocess of the service.

The service names the execution (``ENGINE_RUN_ID``), so the flow's own FlowStatus row
(``_engine/flow_executions``, with its hops' JobStatus) carries the same id. A flow stored through
the API runs the version that was current when it started: written as a file of its own
(``runs/<id>/flows/``) that the run reads instead of ``jobs/flows/`` (``ENGINE_FLOWS_DIR``). Its
standard output and error are kept beside it. The service's own row per execution
(``_engine/service/executions``, newest row per id wins) says who asked, the process, its exit code
and the outcome:

- exit 0/1: the run's summary status (``SUCCEEDED``, ``PARTIAL``, ``FAILED``);
- exit 2: ``FAILED``, the config error's message;
- exit 3: ``SKIPPED``: another execution of the flow holds its lease (two never overlap);
- a signal: ``CANCELLED`` when asked through the API (SIGTERM, graceful), ``FAILED`` otherwise.

A service that stops leaves its executions running (each in its own session). Started again, it
finds the ones that have no end: a process still alive is watched again, one that is gone is
ended with what its FlowStatus row says, or ``FAILED`` when it has none (the flow's next run
recovers its data, as the commit protocol does for any killed run).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.config.jobs_source import FLOWS_DIR_ENV
from engine.errors import EXIT_BUSY, EXIT_CONFIG, EXIT_SIGNALLED
from engine.platform.procs import pid_start, process_alive
from engine.service.errors import Conflict, NotFound
from engine.service.flowstore import StoredFlow
from engine.service.tables import ServiceTable, utcnow

log = logging.getLogger(__name__)

EXECUTION_COLUMNS = (
    ("execution_id", "string"),
    ("flow_group", "string"),
    ("flow_name", "string"),
    ("flow_version", "long"),
    ("status", "string"),
    ("message", "string"),
    ("requested_by", "string"),
    ("trigger", "string"),
    ("host", "string"),
    ("pid", "long"),
    ("pid_start", "string"),
    ("service", "string"),
    ("exit_code", "long"),
    ("start_time", "timestamp"),
    ("end_time", "timestamp"),
    ("changed_at", "timestamp"),
)
RUNS_DIR = "runs"
RUN_ID_ENV = "ENGINE_RUN_ID"
"""The run id a run takes (:data:`engine.cli.app.RUN_ID_ENV`; engine.cli is not importable here)."""
OWNER_GROUPS_ENV = "ENGINE_OWNER_GROUPS"
"""The owner's groups a run reads (:data:`engine.cli.flows.OWNER_GROUPS`)."""
EXIT_FILE = "exit_code"
RECORD_EXIT = """
trap 'stop=1; [ -n "${child:-}" ] && kill -TERM "$child" 2>/dev/null' TERM INT
"${@:2}" & child=$!
[ -n "${stop:-}" ] && kill -TERM "$child" 2>/dev/null
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
echo "$code" > "$1.tmp" && mv "$1.tmp" "$1"
exit "$code"
"""
"""Runs the command, passes SIGTERM on to it (``spark-submit.sh`` holds it until the driver can
take it, and the driver stops gracefully) and writes its exit code to a file: a service started
again after the one that launched it died cannot wait for the process, but reads how it ended. A
cancel that comes while the command is being started (before ``child`` is set) is passed on as soon
as it is."""
POLL_SECONDS = 1.0
"""How often an adopted execution (started by a service process that is gone) is looked at."""
END_ATTEMPTS = 3
"""How many times an execution's end row is written before it is left to the next start."""
ORPHAN_SECONDS = 5.0
"""How often a service looks for executions whose service process is gone."""


@dataclass(frozen=True)
class Launch:
    """How executions are started: the submit script, the warehouse and the command-line
    overrides every execution gets (``topology_dir=...``)."""

    submit: Path
    warehouse: str
    overrides: tuple[str, ...] = ()


class Executions:
    def __init__(self, root: str, launch: Launch) -> None:
        self.root = root
        self.launch = launch
        self.table = ServiceTable(root, "executions", EXECUTION_COLUMNS)
        self.flow_status = FlowStatusReader(f"{launch.warehouse}/_engine/flow_executions")
        self._cancellers: dict[str, str] = {}
        """The executions cancelled through this service, and by whom."""
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._cached: tuple[list[dict[str, Any]], dict[tuple[Any, ...], dict[str, Any]]] | None = None
        self._watched: set[str] = set()
        """The executions this service watches: it started them, or adopted them."""
        self._lock = threading.Lock()

    # -- starting -------------------------------------------------------------------------------

    def start(self, flow: StoredFlow, *, by: str, trigger: str, owner_groups: tuple[str, ...]) -> dict[str, Any]:
        """Start ``flow`` now; its execution's first row."""
        execution = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        where = Path(self.root) / RUNS_DIR / execution
        where.mkdir(parents=True)
        env = {**os.environ, RUN_ID_ENV: execution, OWNER_GROUPS_ENV: ",".join(owner_groups)}
        if flow.origin == "api":
            flows = where / "flows"
            (flows / flow.group).mkdir(parents=True)
            text = json.dumps(_runnable(flow.config), indent=2)  # JSON is YAML, read as a flow file is
            (flows / flow.group / f"{flow.name}.yaml").write_text(text)
            env[FLOWS_DIR_ENV] = str(flows)
        else:
            env.pop(FLOWS_DIR_ENV, None)
        command = [
            str(self.launch.submit),
            f"flow={flow.group}/{flow.name}",
            "mode=run",
            "progress=off",
            f"warehouse={self.launch.warehouse}",
            *self.launch.overrides,
        ]
        wrapped = ["bash", "-c", RECORD_EXIT, "record-exit", str(where / EXIT_FILE), *command]
        with open(where / "stdout.log", "wb") as out, open(where / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                wrapped, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
            )
        row = {
            "execution_id": execution,
            "flow_group": flow.group,
            "flow_name": flow.name,
            "flow_version": flow.version,
            "status": "RUNNING",
            "message": "",
            "requested_by": by,
            "trigger": trigger,
            "host": socket.gethostname(),
            "pid": proc.pid,
            "pid_start": pid_start(proc.pid),
            "service": _this_service(),
            "exit_code": None,
            "start_time": utcnow(),
            "end_time": None,
            "changed_at": utcnow(),
        }
        try:
            self.table.append([row])
        except Exception:  # not recorded, it could never be found again: it must not run
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        with self._lock:
            self._procs[execution] = proc
            self._watched.add(execution)
        threading.Thread(target=self._watch, args=(row, proc), name=f"execution-{execution}", daemon=True).start()
        log.info("execution %s of flow %s/%s started (pid %d) by %s", execution, flow.group, flow.name, proc.pid, by)
        return row

    def _watch(self, row: dict[str, Any], proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        with self._lock:
            self._procs.pop(row["execution_id"], None)
        self._end(row, code)

    def _end(self, row: dict[str, Any], code: int | None) -> None:
        if code is None:  # a process an earlier service started: it wrote its exit code
            code = _exit_code(Path(self.root) / RUNS_DIR / row["execution_id"] / EXIT_FILE)
        try:
            status, message = self._outcome(row, code)
        except Exception as exc:  # an end row all the same: a watcher that died would leave it RUNNING
            log.exception("execution %s: cannot tell how it ended", row["execution_id"])
            status, message = "FAILED", f"the run ended (exit code {code}) but its outcome could not be read: {exc}"
        ended = {
            **row,
            "status": status,
            "message": message,
            "exit_code": code,
            "end_time": utcnow(),
            "changed_at": utcnow(),
        }
        for attempt in range(END_ATTEMPTS):
            try:
                self.table.append([ended])
                break
            except Exception:  # tried again; after that, found again by the next start of the service
                log.exception("execution %s ended (%s) but its row could not be written", row["execution_id"], status)
                time.sleep(2.0 * (attempt + 1))
        log.info(
            "execution %s of flow %s/%s ended: %s %s",
            row["execution_id"],
            row["flow_group"],
            row["flow_name"],
            status,
            message,
        )

    def _outcome(self, row: dict[str, Any], code: int | None) -> tuple[str, str]:
        execution = row["execution_id"]
        summary = _summary(Path(self.root) / RUNS_DIR / execution / "stdout.log")
        said = str(summary.get("message") or "")
        if code == EXIT_BUSY:
            return "SKIPPED", f"another execution of the flow is running: {said}".rstrip(": ")
        signalled = code is not None and (code < 0 or code >= EXIT_SIGNALLED)
        by = self._cancellers.get(execution)
        if summary.get("status") == "CANCELLED" or (by and signalled):  # not a run that ended anyway
            return "CANCELLED", f"cancelled by {by}" if by else said or "cancelled"
        if signalled:
            assert code is not None
            return "FAILED", f"the run was killed by signal {-code if code < 0 else code - EXIT_SIGNALLED}"
        if code is None:  # killed with its wrapper: its FlowStatus row is all there is
            found = self.flow_status.execution(execution)
            if found is not None and found["end_time"] is not None:
                return str(found["status"]), str(found["message"] or "")
            return "FAILED", "the run ended while the service was not running and left no status"
        if code == EXIT_CONFIG:
            return (
                "FAILED",
                f"config error: {said or _last_error(Path(self.root) / RUNS_DIR / execution / 'stderr.log')}",
            )
        status = str(summary.get("status") or ("SUCCEEDED" if code == 0 else "FAILED"))
        return status, said

    # -- cancelling -----------------------------------------------------------------------------

    def cancel(self, execution: str, *, by: str) -> dict[str, Any]:
        """Ask a running execution to stop (SIGTERM to ``spark-submit.sh``: graceful, the run
        publishes nothing half-done). Its row ends ``CANCELLED`` once the process ends."""
        row = self.get(execution)
        if row["end_time"] is not None:
            raise Conflict(f"execution {execution} has ended ({row['status']}): nothing to cancel")
        if row["host"] != socket.gethostname():
            raise Conflict(f"execution {execution} runs on host {row['host']}: cancel it from the service there")
        if not _alive(int(row["pid"] or 0), row["pid_start"]):  # (never signal a reused pid)
            raise Conflict(f"execution {execution} has just ended; its status follows")
        self._cancellers[execution] = by
        with suppress(ProcessLookupError):  # it has just ended: its watcher writes the row
            os.kill(int(row["pid"]), signal.SIGTERM)
        log.info("execution %s: cancel asked by %s", execution, by)
        return row

    # -- reading --------------------------------------------------------------------------------

    def get(self, execution: str) -> dict[str, Any]:
        found = self._newest().get((execution,))
        if found is None:
            raise NotFound(f"no flow execution {execution}")
        return found

    def of_flow(self, group: str, name: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """The flow's last executions, newest first."""
        rows = [r for r in self._newest().values() if r["flow_group"] == group and r["flow_name"] == name]
        return sorted(rows, key=lambda r: r["start_time"], reverse=True)[:limit]

    def all(self) -> list[dict[str, Any]]:
        """Every execution's newest row."""
        return list(self._newest().values())

    def _newest(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The newest row per execution: an end row over the start row, whatever the clocks say."""
        rows = self.table.rows()
        if self._cached is not None and self._cached[0] is rows:
            return self._cached[1]
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            key = (row["execution_id"],)
            held = found.get(key)
            if held is None or (row["end_time"] is not None, row["changed_at"]) >= (
                held["end_time"] is not None,
                held["changed_at"],
            ):
                found[key] = row
        self._cached = (rows, found)
        return found

    def output(self, execution: str) -> str:
        """The execution's standard error, then its standard output (the run's summary last)."""
        self.get(execution)
        where = Path(self.root) / RUNS_DIR / execution
        parts = []
        for name in ("stderr.log", "stdout.log"):
            path = where / name
            text = path.read_text(errors="replace") if path.is_file() else ""
            parts.append(f"==> {name} <==\n{text}")
        return "\n".join(parts)

    def describe(self, row: dict[str, Any]) -> dict[str, Any]:
        """The seed's FlowStatus of an execution: the service's row and the flow's own."""
        found = self.flow_status.execution(row["execution_id"])
        job_statuses = json.loads(found["job_statuses"] or "[]") if found else []
        return {
            "flowExecutionId": row["execution_id"],
            "flowGroup": row["flow_group"],
            "flowName": row["flow_name"],
            "flowVersion": row["flow_version"],
            "executionStatus": row["status"],
            "message": row["message"],
            "requestedBy": row["requested_by"],
            "trigger": row["trigger"],
            "exitCode": row["exit_code"],
            "executionStartTime": _millis(row["start_time"]),
            "executionEndTime": _millis(row["end_time"]),
            "jobStatuses": job_statuses,
            "processedCount": sum(int(j.get("processedCount") or 0) for j in job_statuses),
            "errorCount": sum(int(j.get("errorCount") or 0) for j in job_statuses),
        }

    # -- after a restart ------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Find the executions of this host that have no end and no live service watching them
        (it was killed, or stopped): watch again those still running, end those that are gone.
        The ids it ended. Called at start and every :data:`ORPHAN_SECONDS` after."""
        ended = []
        here = socket.gethostname()
        for row in self._newest().values():
            execution = row["execution_id"]
            if row["end_time"] is not None or row["host"] != here or execution in self._watched:
                continue
            if row["service"] != _this_service() and _service_alive(row["service"]):
                continue  # its own service watches it
            if _alive(int(row["pid"] or 0), row["pid_start"]):
                self._watched.add(execution)
                threading.Thread(target=self._poll, args=(row,), name=f"execution-{execution}", daemon=True).start()
                log.info("execution %s (pid %s) still runs: watched by this service now", execution, row["pid"])
            else:
                self._end(row, None)
                ended.append(execution)
        return ended

    def watch_orphans(self) -> None:
        """:meth:`recover` every :data:`ORPHAN_SECONDS`, on a thread of its own."""

        def loop() -> None:
            while True:
                time.sleep(ORPHAN_SECONDS)
                try:
                    self.recover()
                except Exception:  # the store unreachable: next time
                    log.exception("cannot look for executions left by another service")

        threading.Thread(target=loop, name="orphans", daemon=True).start()

    def _poll(self, row: dict[str, Any]) -> None:
        """Wait for a process this service did not start (its exit code is in its file)."""
        while _alive(int(row["pid"] or 0), row["pid_start"]):
            time.sleep(POLL_SECONDS)
        self._end(row, None)


class FlowStatusReader:
    """The engine's FlowStatus rows (``_engine/flow_executions``), read with delta-rs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._handle: Any = None

    def execution(self, execution: str) -> dict[str, Any] | None:
        """The newest row of ``execution`` (its end row once it has ended), or None."""
        rows = self._rows(execution)
        if not rows:
            return None
        return sorted(rows, key=lambda r: (r["end_time"] is not None, r["start_time"]))[-1]

    def _rows(self, execution: str) -> list[dict[str, Any]]:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        with self._lock:
            try:
                if self._handle is None:
                    self._handle = DeltaTable(self.path)
                else:
                    self._handle.update_incremental()
                found = self._handle.to_pyarrow_table(filters=[("execution_id", "=", execution)])
            except TableNotFoundError:
                return []
            except Exception as exc:  # a status without its hops is still an answer
                log.warning("cannot read the flow executions at %s: %s", self.path, exc)
                return []
        return list(found.to_pylist())


def _runnable(config: dict[str, Any]) -> dict[str, Any]:
    """A stored FlowConfig as a flow file holds it (its group and name are the file's place)."""
    return {k: v for k, v in config.items() if k not in ("flowGroup", "flowName")}


def _summary(stdout: Path) -> dict[str, Any]:
    """The run's summary: the last line of its standard output, when that is a JSON object."""
    try:
        lines = [line for line in stdout.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return {}
    try:
        found = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _exit_code(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _last_error(stderr: Path) -> str:
    try:
        lines = [line for line in stderr.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")


def _this_service() -> str:
    """This service process, ``host:pid:start``: who watches the executions it starts."""
    return f"{socket.gethostname()}:{os.getpid()}:{pid_start(os.getpid()) or ''}"


def _service_alive(service: str | None) -> bool:
    """Whether the service process ``host:pid:start`` (on this host) still runs."""
    _, _, rest = (service or "").partition(":")
    pid, _, start = rest.partition(":")
    return pid.isdigit() and _alive(int(pid), start or None)


def _alive(pid: int, start: str | None) -> bool:
    return pid > 0 and process_alive(pid, start)


def _millis(at: datetime | None) -> int | None:
    if at is None:
        return None
    return int((at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp() * 1000)
