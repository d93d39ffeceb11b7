"""Run a flow (``flow=<group>/<name>``): its hops in dependency order, then one FlowStatus.

The hops whose executor is this application's (its master; any local master for a local one) run
as DAGs of one job, ``flow.<group>.<name>``, with ``after`` dependencies, in this SparkContext. A
hop on another executor is submitted with ``spark-submit.sh --master <its master> hop=<name>``
(the same flow, compiled again, only that hop) and its summary collected. Every hop keeps its
own state and commit log under the flow's job (its DAGs are named after the hop), so exactly-once
holds per hop and a rerun redoes only what is unfinished: a finished hop reads nothing new.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from engine.cli.modes import HANDLERS, Run, absolute, run_job, session, validate_job
from engine.config.paths import SOURCE_TREE
from engine.errors import ConfigError, EngineError
from engine.flow import FlowPlan, Hop, compile_flow
from engine.runtime.lineage import PARENT_ENV
from engine.state.rows import utcnow
from engine.state.status import Status

if TYPE_CHECKING:
    from engine.config import AppConfig
    from engine.runtime.lineage import FlowLineage
    from engine.runtime.stop import Stop
    from engine.spec.app import AppConf
    from engine.state.delta_store import DeltaMetadataStore

log = logging.getLogger("engine")

SUBMIT = "spark-submit.sh"
PARENT = "ENGINE_FLOW_PARENT"
"""Set for a hop a flow submits (to its job name): the flow holds the flow's lease for it."""
RESIGNAL_SECONDS = 5.0
"""A stopped flow signals a submitted hop again this often until it ends (spark-submit.sh passes
SIGTERM to the Python driver, which exists only once the JVM has started it)."""
OWNER_GROUPS = "ENGINE_OWNER_GROUPS"
"""The groups of the flow's ``owner`` (comma-separated), for the template packs' ``group:<name>``
principals: the flow service sets it from the owner's user record, having checked the flow."""
NOT_FORWARDED = ("flow", "hop", "mode", "warehouse", "progress", "topology_dir")
"""Command-line keys a submitted hop gets from the flow rather than from the parent's command."""


def execute_flow(
    app: AppConfig,
    conf: AppConf,
    run_id: str,
    stop: Stop,
    mask: Callable[[str], str],
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None,
) -> dict[str, Any]:
    assert conf.flow is not None and app.flow_choice is not None
    warehouse = absolute(conf.warehouse)
    plan = compile_flow(
        conf.flow,
        choice=app.flow_choice,
        file=app.flow_file,
        warehouse=warehouse,
        topology=conf.topology_dir,
        prepare=prepare,
        groups=tuple(g for g in os.environ.get(OWNER_GROUPS, "").split(",") if g),
    )
    log.info("flow %s/%s compiled: %d hop(s)", plan.group, plan.name, len(plan.hops))
    if conf.mode == "plan":
        return {"run_id": run_id, "job": plan.job_name, "status": Status.OK, **plan.describe()}
    if conf.hop is not None:  # one hop: submitted by its flow on its executor, or run by hand
        hop = plan.hop(conf.hop)
        spec = plan.job_spec([hop.name])
        names = [plan.hop_lease(hop.name)]
        if os.environ.get(PARENT) != plan.job_name:  # by hand: not while the flow runs
            names.insert(0, plan.job_name)
        run = Run(conf, spec, session(conf, spec), run_id, stop, warehouse, mask, lease_names=tuple(names))
        return HANDLERS[conf.mode](run)
    whole = plan.job_spec()
    spark = session(conf, whole)
    master = str(spark.sparkContext.master)
    here = [h.name for h in plan.hops if same_executor(h.master, master)]
    leases = (plan.job_name, *(plan.hop_lease(h) for h in here))  # a hop run by hand waits for these
    run = Run(conf, plan.job_spec(here), spark, run_id, stop, warehouse, mask, lease_names=leases)
    if conf.mode == "validate":
        summary = validate_job(run)
        elsewhere = [h.name for h in plan.hops if h.name not in here]
        return {**summary, "hops": [h.name for h in plan.hops], "compiled_only": elsewhere}
    if conf.mode == "status":
        return flow_status(run.metadata, plan, runs=conf.status.runs, run_id=run_id)
    if conf.mode != "run":  # checkpoint, commit: every hop's DAGs, as one job's
        return HANDLERS[conf.mode](replace(run, spec=whole))
    _check_submittable(plan, here, warehouse)
    return FlowExecution(plan, run, app, here).execute()


def _check_submittable(plan: FlowPlan, here: list[str], warehouse: str) -> None:
    """Refuse what would leave a submitted hop waiting on its own flow: on S3, the warehouse's
    writer lease (held by the flow for its ``_engine/`` tables) admits one driver."""
    from engine.commit.lease import single_writer

    elsewhere = [h for h in plan.hops if h.name not in here]
    if elsewhere and single_writer(warehouse):
        raise ConfigError(
            f"hop `{elsewhere[0].name}` runs on executor `{elsewhere[0].executor}` ({elsewhere[0].master}), "
            f"another driver, but the warehouse {warehouse} is on an object store, where one driver at a time "
            "writes its `_engine/` tables; run those hops here (an executor with this application's master) "
            "or use a warehouse on a shared file system",
            key="warehouse",
        )


def same_executor(hop_master: str, master: str) -> bool:
    """Whether a hop on ``hop_master`` runs in an application on ``master``."""
    return hop_master == master or (hop_master.startswith("local") and master.startswith("local"))


@dataclass
class HopOutcome:
    hop: Hop
    status: Status
    message: str = ""
    start: datetime = field(default_factory=utcnow)
    end: datetime | None = None
    run_id: str | None = None
    dags: list[dict[str, Any]] = field(default_factory=list)

    def job_status(self, plan: FlowPlan, metadata: DeltaMetadataStore | None) -> dict[str, Any]:
        """The seed's JobStatus of this hop (and what it ran where)."""
        low, high = _watermarks(metadata, plan.job_name, self.run_id, set(self.hop.dag_names().values()))
        return {
            "flowGroup": plan.group,
            "flowName": plan.name,
            "jobName": self.hop.name,
            "jobGroup": plan.job_name,
            "executionStartTime": _millis(self.start),
            "executionEndTime": _millis(self.end),
            "executionStatus": self.status,
            "message": self.message,
            "processedCount": sum(int(d.get("records_read") or 0) for d in self.dags),
            "errorCount": sum(int(d.get("records_rejected") or 0) for d in self.dags),
            "lowWatermark": low,
            "highWatermark": high,
            "template": self.hop.template,
            "executor": self.hop.executor,
            "run_id": self.run_id,
            "dags": [{k: d.get(k) for k in ("name", "status", "message", "records_read", "sinks")} for d in self.dags],
        }


class FlowExecution:
    """One execution of a flow: its hops in dependency order, its FlowStatus row at start and end."""

    def __init__(self, plan: FlowPlan, run: Run, app: AppConfig, here: list[str]) -> None:
        self.plan = plan
        self.run = run
        self.app = app
        self.here = set(here)
        self.outcomes: dict[str, HopOutcome] = {}
        self.start = utcnow()
        self.lineage = _flow_lineage(run, plan.job_name)

    def execute(self) -> dict[str, Any]:
        metadata = self.run.metadata
        with self.run.lease as held:  # one execution of a flow at a time (exit code 3 otherwise)
            self.run = replace(self.run, held=held)
            if self.lineage is None:
                return self._execute(metadata)
            self.run = replace(self.run, lineage_parent=self.lineage.as_parent)  # its hops' DAGs' parent
            self.lineage.start()
            try:
                summary = self._execute(metadata)
            except BaseException as exc:
                self.lineage.end(Status.FAILED, str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
                raise
            self.lineage.end(summary["status"], summary.get("message") or "")
            return summary

    def _execute(self, metadata: DeltaMetadataStore) -> dict[str, Any]:
        self._close_dead(metadata)
        self._record(metadata, Status.RUNNING, "")
        batch = 0
        try:
            while len(self.outcomes) < len(self.plan.hops) and not self.run.stop.is_set():
                self._skip_after_failures()
                local, remote = self._ready()
                if not local and not remote:
                    break
                threads = [threading.Thread(target=self._submit, args=(h,), name=f"hop-{h.name}") for h in remote]
                for t in threads:
                    t.start()
                try:
                    if local:
                        batch += 1
                        self._run_here(local, batch)
                finally:  # submitted hops end before the flow does, whatever the local ones did
                    for t in threads:
                        t.join()
        finally:
            for hop in self.plan.hops:  # stopped (or a batch raised): what never ran
                if hop.name not in self.outcomes:
                    why = self.run.stop.reason or "the flow stopped first" if self.run.stop.is_set() else "not run"
                    status = Status.CANCELLED if self.run.stop.is_set() else Status.SKIPPED
                    self.outcomes[hop.name] = HopOutcome(hop, status, why, end=utcnow())
            status, message = self._outcome()
            statuses = self._record(metadata, status, message)
        summary = {
            "run_id": self.run.run_id,
            "job": self.plan.job_name,
            "flowGroup": self.plan.group,
            "flowName": self.plan.name,
            "flowExecutionId": self.run.run_id,
            "status": status,
            "message": message,
            "records_read": sum(s["processedCount"] for s in statuses),
            "errors": sum(s["errorCount"] for s in statuses),
            "hops": statuses,
        }
        if self.run.stop.is_set():
            summary["status"] = Status.CANCELLED
            summary["stopped_by"] = self.run.stop.reason
        return summary

    # -- which hops run next --------------------------------------------------------------------

    def _skip_after_failures(self) -> None:
        changed = True
        while changed:
            changed = False
            for hop in self.plan.hops:
                if hop.name in self.outcomes:
                    continue
                failed = [a for a in hop.after if a in self.outcomes and self.outcomes[a].status != Status.SUCCEEDED]
                if failed:
                    why = f"hop {failed[0]} did not succeed ({self.outcomes[failed[0]].status})"
                    self.outcomes[hop.name] = HopOutcome(hop, Status.SKIPPED, why, end=utcnow())
                    changed = True

    def _ready(self) -> tuple[list[Hop], list[Hop]]:
        """The hops to run now: the local ones whose upstreams are done or run with them (as
        ``after`` dependencies, in one job), and the other executors' whose upstreams are done."""
        done = {n for n, o in self.outcomes.items() if o.status == Status.SUCCEEDED}
        local: list[Hop] = []
        remote: list[Hop] = []
        for hop in self.plan.hops:  # in dependency order
            if hop.name in self.outcomes:
                continue
            if hop.name in self.here:
                if all(a in done or a in {h.name for h in local} for a in hop.after):
                    local.append(hop)
            elif all(a in done for a in hop.after):
                remote.append(hop)
        return local, remote

    # -- running them ---------------------------------------------------------------------------

    def _run_here(self, hops: list[Hop], batch: int) -> None:
        run_id = self.run.run_id if batch == 1 else f"{self.run.run_id}.{batch}"
        spec = self.plan.job_spec([h.name for h in hops])
        started = utcnow()
        log.info("flow %s: hops %s run here (run %s)", self.plan.job_name, ", ".join(h.name for h in hops), run_id)
        try:
            summary = run_job(replace(self.run, spec=spec, run_id=run_id))
        except ConfigError:
            raise
        except EngineError as exc:
            if exc.exit_code != 1:  # another run holds the lease: the flow did nothing
                raise
            summary = {"status": Status.FAILED, "message": str(exc), "dags": []}
        ended = utcnow()
        by_dag = {d["name"]: d for d in summary.get("dags", []) if isinstance(d, dict)}
        times = self._dag_times(run_id)
        for hop in hops:
            names = list(hop.dag_names().values())
            dags = [by_dag[n] for n in names if n in by_dag]
            status = Status.worst(d["status"] for d in dags) if dags else Status.of(summary.get("status"))
            message = next((d.get("message") for d in dags if d.get("message")), "") or (
                summary.get("message", "") if status != Status.SUCCEEDED else ""
            )
            starts = [times[n][0] for n in names if n in times]
            ends = [e for n in names if n in times and (e := times[n][1]) is not None]
            start, end = (min(starts), max(ends)) if starts and ends else (started, ended)
            self.outcomes[hop.name] = HopOutcome(hop, status, message, start, end, run_id, dags)

    def _dag_times(self, run_id: str) -> dict[str, tuple[datetime, datetime | None]]:
        """When each DAG of the run ``run_id`` started and ended (the runs table)."""
        from engine.state.delta_runs import DeltaRunStore

        run = self.run
        try:
            store = DeltaRunStore(
                run.spark,
                f"{run.warehouse}/_engine/runs",
                backend=run.conf.metadata.backend,
                mask=run.mask,
                options=run.conf.storage.store_options(run.warehouse),
            )
            rows = store.history(self.plan.job_name, limit=200)
        except Exception as exc:  # the hops' times fall back to the batch's
            log.warning("cannot read the run history of %s: %s", self.plan.job_name, exc)
            return {}
        return {r.dag: (r.start_time, r.end_time) for r in rows if r.run_id == run_id}

    def _submit(self, hop: Hop) -> None:
        """``hop`` on its executor: ``spark-submit.sh --master <master> ... hop=<name>``."""
        started = utcnow()
        try:
            self._submitted(hop, started)
        except Exception as exc:  # the hop fails, not the thread
            log.exception("flow %s: hop %s could not be run", self.plan.job_name, hop.name)
            self.outcomes[hop.name] = HopOutcome(hop, Status.FAILED, f"{type(exc).__name__}: {exc}", started, utcnow())

    def _submitted(self, hop: Hop, started: datetime) -> None:
        command = self.command(hop)
        log.info("flow %s: hop %s submitted to %s: %s", self.plan.job_name, hop.name, hop.master, " ".join(command))
        try:
            env = {**os.environ, PARENT: self.plan.job_name}
            if self.run.lineage_parent is not None:
                env[PARENT_ENV] = str(self.run.lineage_parent)
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        except OSError as exc:
            self.outcomes[hop.name] = HopOutcome(hop, Status.FAILED, f"cannot submit: {exc}", started, utcnow())
            return
        last = _wait(proc, self.run.stop, hop.name)
        try:
            summary = json.loads(last) if last else {}
        except json.JSONDecodeError:
            summary = {}
        if not isinstance(summary, dict):
            summary = {}
        if not summary and last:
            sys.stderr.write(f"[{hop.name}] {last}")
        status = Status.of(summary.get("status")) if summary else Status.FAILED
        message = summary.get("message") or ("" if proc.returncode == 0 else f"spark-submit exited {proc.returncode}")
        dags = [d for d in summary.get("dags", []) if isinstance(d, dict)]
        self.outcomes[hop.name] = HopOutcome(hop, status, message, started, utcnow(), summary.get("run_id"), dags)

    def command(self, hop: Hop) -> list[str]:
        """The command that runs ``hop`` alone on its executor; the parent's overrides go with it."""
        forwarded = [o for o in self.app.overrides if o.split("=", 1)[0].lstrip("+~") not in NOT_FORWARDED]
        conf = self.run.conf
        extra = [f"topology_dir={conf.topology_dir}"] if conf.topology_dir else []
        return [
            str(SOURCE_TREE / SUBMIT),
            "--master",
            hop.master,
            *hop.submit,
            f"flow={self.app.flow_choice}",
            f"hop={hop.name}",
            "mode=run",
            "progress=off",
            f"warehouse={self.run.warehouse}",
            *extra,
            *forwarded,
            *hop.overrides,
        ]

    # -- the FlowStatus -------------------------------------------------------------------------

    def _close_dead(self, metadata: DeltaMetadataStore) -> None:
        """End the rows of earlier executions that never ended (killed): this one holds the flow's
        lease, so none of them still runs. Their hops' batches are recovered by this execution."""
        try:
            found = metadata.flow_executions(self.plan.group, self.plan.name, limit=20)
        except Exception as exc:
            log.warning("flow %s: cannot read its executions: %s", self.plan.job_name, exc)
            return
        for row in found:
            if row["end_time"] is None:
                message = f"ended without a status (the process died); execution {self.run.run_id} took over"
                log.warning("flow %s: execution %s %s", self.plan.job_name, row["execution_id"], message)
                metadata.add_flow_execution(
                    {**row, "status": Status.FAILED.value, "message": message, "end_time": utcnow()}
                )

    def _outcome(self) -> tuple[Status, str]:
        statuses = [o.status for o in self.outcomes.values()]
        if self.run.stop.is_set():
            return Status.CANCELLED, self.run.stop.reason or "stopped"
        worst = Status.worst(statuses)
        if worst == Status.SUCCEEDED:
            return Status.SUCCEEDED, ""
        failed = [o for o in self.outcomes.values() if o.status not in (Status.SUCCEEDED, Status.SKIPPED)]
        first = failed[0] if failed else next(o for o in self.outcomes.values() if o.status != Status.SUCCEEDED)
        some = any(o.status in (Status.SUCCEEDED, Status.PARTIAL) for o in self.outcomes.values())
        status = Status.PARTIAL if some else Status.FAILED
        return status, f"hop {first.hop.name}: {first.status}" + (f": {first.message}" if first.message else "")

    def _record(self, metadata: DeltaMetadataStore, status: Status, message: str) -> list[dict[str, Any]]:
        ended = status != Status.RUNNING
        statuses = [
            self.outcomes[h.name].job_status(self.plan, metadata) for h in self.plan.hops if h.name in self.outcomes
        ]
        row = {
            "flow_group": self.plan.group,
            "flow_name": self.plan.name,
            "execution_id": self.run.run_id,
            "status": status.value,
            "message": message,
            "start_time": self.start,
            "end_time": utcnow() if ended else None,
            "job_statuses": json.dumps(statuses, default=str),
        }
        try:
            metadata.add_flow_execution(row)
        except Exception as exc:  # the hops' own state and history are written; say what is missing
            log.warning("flow %s: the flow execution row could not be written: %s", self.plan.job_name, exc)
        return statuses


def _flow_lineage(run: Run, job: str) -> FlowLineage | None:
    """The flow's own OpenLineage events, if ``lineage`` names a destination."""
    if not run.conf.lineage.enabled:
        return None
    from engine.runtime.lineage import FlowLineage, Parent, Sender

    return FlowLineage(Sender(run.conf.lineage), job, run.run_id, Parent.from_env(), run.mask)


def flow_status(metadata: DeltaMetadataStore, plan: FlowPlan, *, runs: int, run_id: str) -> dict[str, Any]:
    """``mode=status``: the flow's last executions, each with its hops' JobStatus."""
    executions = []
    for row in metadata.flow_executions(plan.group, plan.name, limit=runs):
        executions.append(
            {
                "flowExecutionId": row["execution_id"],
                "executionStartTime": _millis(row["start_time"]),
                "executionEndTime": _millis(row["end_time"]),
                "executionStatus": row["status"],
                "message": row["message"],
                "jobStatuses": json.loads(row["job_statuses"] or "[]"),
            }
        )
    return {
        "run_id": run_id,
        "job": plan.job_name,
        "status": Status.OK,
        "flowGroup": plan.group,
        "flowName": plan.name,
        "hops": [h.name for h in plan.hops],
        "executions": executions,
    }


def _wait(proc: subprocess.Popen[str], stop: Stop, hop: str) -> str:
    """``proc``'s last line on stdout once it ends (its summary); every other line (its end table,
    or a driver's log when its stderr is merged into stdout) goes to stderr as ``[<hop>] <line>``. A stop of
    the flow is passed on as SIGTERM (graceful)."""
    last: list[str] = []

    def relay() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                if last:
                    sys.stderr.write(f"[{hop}] {last[-1]}")
                last[:] = [line]
        sys.stderr.flush()

    reader = threading.Thread(target=relay, name=f"relay-{hop}", daemon=True)
    reader.start()
    told = 0.0
    while proc.poll() is None:
        if stop.is_set() and time.monotonic() - told > RESIGNAL_SECONDS:
            proc.send_signal(signal.SIGTERM)  # again until it ends: the driver may not have started yet
            told = time.monotonic()
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
    reader.join()
    return last[0] if last else ""


def _watermarks(
    metadata: DeltaMetadataStore | None, job: str, run_id: str | None, dags: set[str]
) -> tuple[str | None, str | None]:
    """A hop's low and high watermarks in its run: the one dataset's, or a JSON object by dataset."""
    if metadata is None or run_id is None:
        return None, None
    try:
        rows = [r for r in metadata.job_status(job, runs=20) if r.run_id == run_id and r.dag in dags]
    except Exception as exc:  # the status is still worth writing
        log.warning("cannot read the job status of %s: %s", job, exc)
        return None, None
    if not rows:
        return None, None
    if len(rows) == 1:
        return rows[0].low, rows[0].high
    lows = {f"{r.dag}/{r.dataset}": r.low for r in rows}
    highs = {f"{r.dag}/{r.dataset}": r.high for r in rows}
    return json.dumps(lows, sort_keys=True), json.dumps(highs, sort_keys=True)


def _millis(at: datetime | None) -> int | None:
    """Epoch milliseconds; a naive time is UTC (the metadata's)."""
    if at is None:
        return None
    return int((at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp() * 1000)
