"""What each ``mode=`` does with a compiled job: one small handler per mode, looked up in
:data:`HANDLERS`.

Every mode compiles the job and starts Spark the same way (:func:`execute`); a handler gets the
:class:`Run` and returns the run's summary. The metadata store and the lease are opened only by
the modes that use them (``validate`` touches no metadata).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.progress import shown
from engine.errors import UnreachableError
from engine.spec.app import AppConf
from engine.state.status import Status
from engine.storage.paths import StoragePath

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.commit.lease import Lease, Leases
    from engine.config import AppConfig
    from engine.runtime.lineage import DagLineage, Parent
    from engine.runtime.stop import Stop
    from engine.spec import JobSpec
    from engine.state.delta_store import DeltaMetadataStore

__all__ = ["HANDLERS", "Run", "execute", "run_job", "session", "validate_job"]

log = logging.getLogger("engine")


@dataclass
class Run:
    """One composed run, its job compiled and Spark started: what a mode handler works with."""

    conf: AppConf
    spec: JobSpec
    spark: SparkSession
    run_id: str
    stop: Stop
    warehouse: str
    """Absolute (a local path resolved against the working directory)."""
    mask: Callable[[str], str] = lambda text: text
    """Hides the secrets the run decrypted in what it stores (:class:`engine.config.secrets.Secrets`)."""
    lease_names: tuple[str, ...] = ()
    """The run leases' names when not the job's: a flow's and its hops' (one hop of a flow run on
    its own takes its hop's, and its flow's unless the flow submitted it)."""
    held: Leases | None = None
    """The run lease, already held by the caller (a flow holds its own while its hops run)."""
    lineage_parent: Parent | None = None
    """The OpenLineage run the DAGs' runs are part of: their flow's; else ``OPENLINEAGE_PARENT_ID``'s."""

    @cached_property
    def metadata(self) -> DeltaMetadataStore:
        from engine.state.delta_store import DeltaMetadataStore

        return DeltaMetadataStore(
            self.spark,
            f"{self.warehouse}/_engine",
            mask=self.mask,
            backend=self.conf.metadata.backend,
            options=self.conf.storage.store_options(self.warehouse),
        )

    @cached_property
    def lease(self) -> Leases:
        """The job's run lease and, with the warehouse on S3, the warehouse's writer lease (every
        job writes its ``_engine/`` tables)."""
        from engine.commit.lease import Lease, Leases, single_writer

        root = f"{self.warehouse}/_engine"
        leases = [
            Lease(
                root,
                name,
                run_id=self.run_id,
                ttl_seconds=self.ttl,
                files=self.conf.storage.blobs(f"{root}/leases/{name}"),
            )
            for name in self.lease_names or (self.spec.name,)
        ]
        if single_writer(self.warehouse):
            what = f"the warehouse {self.warehouse} (its `_engine/` tables, which every job writes)"
            leases.append(self._writer(self.warehouse, what, where=f"{root}/writer"))
        return Leases(leases)

    def writers(self) -> Leases:
        """:attr:`lease` and the writer lease of each Delta table on S3 that the job writes."""
        from engine.commit.lease import Leases, single_writer

        tables = sorted({t for dag in self.spec.dags for t in dag.delta_tables() if single_writer(t)})
        own = [] if self.held is not None else self.lease.leases
        return Leases([*own, *(self._writer(t) for t in tables)])

    def _writer(self, location: str, what: str | None = None, where: str | None = None) -> Lease:
        from engine.commit.lease import writer_lease

        files = self.conf.storage.blobs
        return writer_lease(
            location, self.spec.name, run_id=self.run_id, ttl_seconds=self.ttl, files=files, what=what, where=where
        )

    @property
    def ttl(self) -> float:
        return self.conf.lease.ttl_seconds

    def open_state(self) -> tuple[DeltaMetadataStore, Leases]:
        """The metadata store and the job's lease, in that order; every mode but ``validate`` opens
        both first, even to show something (the lease refuses a warehouse it cannot lock)."""
        return self.metadata, self.lease

    @property
    def attempts(self) -> dict[str, int]:
        """Each DAG's ``publish.max_attempts``."""
        return {d.name: d.publish.max_attempts for d in self.spec.dags}


def execute(app: AppConfig, conf: AppConf, run_id: str, stop: Stop, mask: Callable[[str], str]) -> dict[str, Any]:
    """Compile the job, start Spark and run the mode's handler; ``mask`` hides the run's decrypted
    secrets in the messages it stores. (A flow's run goes to :func:`engine.cli.flows.execute_flow`.)"""
    run = replace(_start(app, conf, run_id, stop), mask=mask)
    log.info("job %s compiled: %d dag(s); run %s", run.spec.name, len(run.spec.dags), run_id)
    return HANDLERS[conf.mode](run)


def _start(app: AppConfig, conf: AppConf, run_id: str, stop: Stop) -> Run:
    from engine.spec import compile_job  # no JVM needed up to here

    warehouse = absolute(conf.warehouse)
    name = (app.job_choice or "job").replace("/", ".")
    assert conf.job is not None
    spec = compile_job(conf.job, name=name, file=app.job_file, warehouse=warehouse)

    from engine.runtime.discovery import discover

    spark = session(conf, spec)
    if spec.discover is not None:
        found = discover(spark, spec.discover, file=app.job_file)
        spec = compile_job(conf.job, name=name, file=app.job_file, warehouse=warehouse, found=found)
    return Run(conf, spec, spark, run_id, stop, warehouse)


def session(conf: AppConf, spec: JobSpec) -> SparkSession:
    """The run's Spark session: the job's pools, the ``spark`` settings and object stores."""
    from engine.runtime import build_session
    from engine.runtime.session import fair_pools, object_store_settings, run_session

    settings = {**fair_pools(spec.pools), **conf.spark.conf}
    root = build_session(conf.spark.app_name, settings)
    object_store_settings(root, conf.storage.hadoop_settings())
    return run_session(root, conf.spark.conf)


VALIDATE_UNREACHABLE = (
    "mode=validate stopped there: its exit code 1 says that a system the job needs could not be reached, "
    "not that the config is wrong (that is exit code 2); validate again once it can be"
)
"""What ``mode=validate`` adds to an :class:`~engine.errors.UnreachableError`'s message."""


def validate_job(run: Run) -> dict[str, Any]:
    from engine.runtime import JobManager

    try:
        JobManager(run.spark).validate(run.spec, run.run_id)
    except UnreachableError as exc:
        exc.note = VALIDATE_UNREACHABLE
        raise
    return {"run_id": run.run_id, "job": run.spec.name, "status": Status.VALID, "dags": [d.name for d in run.spec.dags]}


def run_job(run: Run) -> dict[str, Any]:
    from engine.runtime import JobManager
    from engine.runtime.executor_reach import check_executors_see
    from engine.runtime.progress import Board
    from engine.state.delta_runs import DeltaRunStore

    check_executors_see(run.spark, run.warehouse)  # before anything is written (modes that only read skip it)
    metadata, _ = run.open_state()
    backend = run.conf.metadata.backend
    options = run.conf.storage.store_options(run.warehouse)
    store = DeltaRunStore(run.spark, f"{run.warehouse}/_engine/runs", backend=backend, mask=run.mask, options=options)
    with run.writers() as lease:  # one run of a job at a time, one writer per table on S3 (exit code 3 otherwise)
        connections = run.conf.storage.options
        guard = lease.check if run.held is None else _both(run.held.check, lease.check)
        manager = JobManager(run.spark, metadata, guard=guard, backend=backend, connections=connections)
        planned = manager.plan(run.spec, run.run_id)  # recovery, then every config mistake surfaces here
        metadata.ensure()
        store.ensure()
        board = Board()
        board.add([d.name for d in run.spec.dags])
        lineage = _lineage(run)
        if lineage is not None:
            board.listeners.append(lineage.on_progress)
        view = "log" if run.conf.logs == "json" and run.conf.progress in ("auto", "live") else run.conf.progress
        try:
            with shown(board, view):
                summary = manager.execute(planned, store, stop=run.stop, board=board).summary()
        finally:
            if lineage is not None:
                lineage.close()
    if run.conf.metrics.enabled:  # one read of the state, only for the metrics
        _add_watermark_lags(summary, metadata.all_state(run.spec.name))
    return summary


def _lineage(run: Run) -> DagLineage | None:
    """The OpenLineage events of the run's DAGs, if ``lineage`` names a destination."""
    if not run.conf.lineage.enabled:
        return None
    from engine.runtime.lineage import DagLineage, Parent, Sender

    parent = run.lineage_parent or Parent.from_env()
    return DagLineage(Sender(run.conf.lineage), run.spec, run.run_id, parent, run.mask)


def _add_watermark_lags(summary: dict[str, Any], states: list[Any]) -> None:
    """Each DAG's ``watermark_lag_seconds``: how far behind now its oldest time-based watermark
    (a timestamp, a file's modification time) is, of its live datasets."""
    from engine.state.store import LIVE

    now = datetime.now(timezone.utc).replace(tzinfo=None)
    lags: dict[str, float] = {}
    for s in states:
        moment = s.watermark.moment() if s.watermark is not None and s.scope == LIVE else None
        if moment is not None:
            lags[s.dag] = max(lags.get(s.dag, 0.0), (now - moment).total_seconds())
    for dag in summary.get("dags", []):
        if isinstance(dag, dict) and dag.get("name") in lags:
            dag["watermark_lag_seconds"] = round(lags[dag["name"]], 3)


def _both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        first()
        second()

    return both


def _status(run: Run) -> dict[str, Any]:
    from engine.cli.status import status_report

    metadata, _ = run.open_state()
    return status_report(metadata, run.spec.name, runs=run.conf.status.runs, max_attempts=run.attempts)


def _checkpoint(run: Run) -> dict[str, Any]:
    from engine.cli.status import checkpoint
    from engine.state.checkpoints import CheckpointRequest

    metadata, lease = run.open_state()
    req = CheckpointRequest(**{"action": "show", **_given(run.conf.checkpoint.model_dump())})
    if req.action == "show":
        return checkpoint(metadata, run.spec.name, list(run.spec.dags), req, run_id=run.run_id)
    # a mistake is refused before anything is written (no lease taken, no table made); checked again under the lease
    checkpoint(metadata, run.spec.name, list(run.spec.dags), req, run_id=run.run_id, write=False)
    with lease:  # changing state while the job runs is refused (exit code 3)
        metadata.ensure()
        return checkpoint(metadata, run.spec.name, list(run.spec.dags), req, run_id=f"checkpoint-{run.run_id}")


def _commit(run: Run) -> dict[str, Any]:
    from engine.cli.commit_log import CommitRequest, commit_command

    metadata, lease = run.open_state()
    req = CommitRequest(**_given(run.conf.commit.model_dump()))
    if req.action == "show":
        return commit_command(metadata, run.spec.name, run.attempts, req, run_id=run.run_id)
    # a mistake is refused before anything is written (no lease taken, no table made); checked again under the lease
    commit_command(metadata, run.spec.name, run.attempts, req, run_id=run.run_id, write=False)
    with lease:  # changing the commit log while the job runs is refused (exit code 3)
        metadata.ensure()
        return commit_command(
            metadata, run.spec.name, run.attempts, req, run_id=f"commit-{run.run_id}", spark=run.spark
        )


def _plan(run: Run) -> dict[str, Any]:
    """The compiled job: each DAG's kind, dependencies, what it reads and what it writes."""
    return {
        "run_id": run.run_id,
        "job": run.spec.name,
        "status": Status.OK,
        "dags": [
            {"name": d.name, "kind": d.kind, "after": list(d.after), "reads": d.inputs(), "writes": d.writes()}
            for d in run.spec.dags
        ],
    }


def _replay(run: Run) -> dict[str, Any]:
    """Error-table rows through the job's current converters (:mod:`engine.cli.error_replay`)."""
    from engine.cli.error_replay import dry_run, replay_spec

    replaying = replace(run, spec=replay_spec(run))
    if run.conf.replay.dry_run:
        run.open_state()  # as every mode but validate: the lease refuses a warehouse it cannot lock
        return dry_run(replaying, replaying.spec)
    return {**run_job(replaying), "mode": "replay"}


HANDLERS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "run": run_job,
    "validate": validate_job,
    "status": _status,
    "checkpoint": _checkpoint,
    "commit": _commit,
    "plan": _plan,
    "replay": _replay,
}
"""The handler of each mode (:data:`engine.spec.app.MODES`)."""


def _given(section: dict[str, Any]) -> dict[str, Any]:
    """The keys of a section that are set (a request's own defaults apply to the others)."""
    return {k: v for k, v in section.items() if v is not None}


def absolute(path: str) -> str:
    """The warehouse as the run uses it: a URL (``file:/x`` too) as written, a plain path absolute."""
    return path if StoragePath.parse(path).is_url else str(Path(path).resolve())
