"""OpenLineage run events of a run's DAGs and flows (``lineage.url``, ``lineage.file``).

Each DAG of a job is an OpenLineage job, ``<job>.<dag>`` in ``lineage.namespace``; each run of it
emits ``START`` when it starts planning or reading, then ``COMPLETE`` (succeeded, or partly: some
datasets published), ``FAIL`` (failed, quarantined, refused by a quality gate) or ``ABORT``
(cancelled, or skipped after an upstream failed). A DAG that never started emits its end alone.
A flow is an OpenLineage job too (its job's name, ``flow.<group>.<name>``), with its own ``START``
and end; each hop's DAG events name the flow's run as their parent (``ParentRunFacet``), in this
process or in a hop the flow submitted. A run started by a scheduler that sets
``OPENLINEAGE_PARENT_ID`` (``<namespace>/<job>/<run id>``, Airflow's convention) becomes that run's
child the same way.

An event's inputs and outputs are the datasets the source and sinks name
(:meth:`~engine.plugins.conf.PluginConf.lineage`, OpenLineage's naming) and the error table. The
end event adds what the run did: records and bytes read (``inputStatistics``), records each sink
and the error table received (``outputStatistics``), how each quality test came out
(``dataQualityAssertions``: rules that can refuse a batch, the error budget, gates) and, when it
did not succeed, why (``errorMessage``).

Run ids are UUIDs derived from the engine's run id, so the same run always has the same id (a
rerun is a new run). Events are sent by one background thread per destination: a slow or dead
receiver never holds a DAG up; what is still unsent when the run ends is waited for up to
``lineage.timeout``, then logged as lost. A failed send is logged and never changes the run.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from openlineage.client import __version__ as CLIENT_VERSION
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    data_quality_assertions_dataset,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
)
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.transport.transport import Transport

from engine import __version__
from engine.plugins.lineage import DatasetName, of_path
from engine.runtime.progress import PLANNING, RUNNING, DagProgress
from engine.state.status import Status

if TYPE_CHECKING:
    from engine.forks.quality import Verdict
    from engine.runtime.dag import DagResult
    from engine.spec import JobSpec
    from engine.spec.app import LineageConf
    from engine.spec.model import AnyDagSpec

log = logging.getLogger(__name__)

__all__ = ["DagLineage", "FlowLineage", "Parent", "Sender", "event_type", "run_uuid"]

PRODUCER = f"https://pypi.org/project/engine/{__version__}"
"""Who made the events (a URI, as the spec asks)."""
PARENT_ENV = "OPENLINEAGE_PARENT_ID"
"""``<namespace>/<job>/<run id>`` of the run this one is part of (a flow's, a scheduler's task's)."""
_ENGINE_RUN = uuid.UUID("5b0e5a57-64b5-4d1e-9a1c-2f6f2a1d7e01")
"""The namespace of the UUIDs derived from the engine's run ids."""
_END = {
    Status.SUCCEEDED: RunState.COMPLETE,
    Status.PARTIAL: RunState.COMPLETE,
    Status.FAILED: RunState.FAIL,
    Status.QUARANTINED: RunState.FAIL,
    Status.CANCELLED: RunState.ABORT,
    Status.SKIPPED: RunState.ABORT,
}


def event_type(status: str) -> RunState:
    """The OpenLineage end of a run with ``status``: a published run completed (wholly or partly)."""
    return _END.get(Status.of(status), RunState.FAIL)


def run_uuid(job: str, run_id: str) -> str:
    """The OpenLineage run id of the engine's run ``run_id`` of ``job`` (a DAG's, a flow's)."""
    return str(uuid.uuid5(_ENGINE_RUN, f"{job}\n{run_id}"))


@dataclass(frozen=True)
class Parent:
    """The run a DAG's run is part of."""

    namespace: str
    job: str
    run_id: str

    @classmethod
    def from_env(cls) -> Parent | None:
        """``OPENLINEAGE_PARENT_ID``, if set and well formed (else a warning, and no parent)."""
        text = os.environ.get(PARENT_ENV, "").strip()
        if not text:
            return None
        namespace, _, rest = text.partition("/")
        job, _, run_id = rest.rpartition("/")
        try:
            uuid.UUID(run_id)
        except ValueError:
            log.warning("lineage: %s=%r is not <namespace>/<job>/<run uuid>; no parent run", PARENT_ENV, text)
            return None
        return cls(namespace, job, run_id) if namespace and job else None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.job}/{self.run_id}"

    def facet(self) -> parent_run.ParentRunFacet:
        return parent_run.ParentRunFacet(
            run=parent_run.Run(runId=self.run_id),
            job=parent_run.Job(namespace=self.namespace, name=self.job),
            producer=PRODUCER,
        )


class Sender:
    """Sends events to every destination of ``lineage`` from one background thread each, so that
    a slow receiver never holds a DAG up."""

    def __init__(self, conf: LineageConf, transports: Iterable[tuple[str, Transport]] | None = None) -> None:
        self.conf = conf
        self._workers = [_Worker(name, t) for name, t in (transports or _transports(conf))]

    def send(self, event: RunEvent) -> None:
        for worker in self._workers:
            worker.put(event)

    def close(self) -> None:
        """Wait up to ``lineage.timeout`` in all for what is queued; what is left is logged as lost."""
        deadline = time.monotonic() + self.conf.timeout
        for worker in self._workers:
            worker.close(deadline)


def _transports(conf: LineageConf) -> list[tuple[str, Transport]]:
    out: list[tuple[str, Transport]] = []
    if conf.url:
        auth = {"type": "api_key", "apiKey": conf.api_key} if conf.api_key else {}
        retry = {"total": 1, "backoff_factor": 0.3, "status_forcelist": [500, 502, 503, 504]}
        base = conf.url if conf.url.endswith("/") else conf.url + "/"  # urljoin keeps the URL's own path
        params = {"url": base, "endpoint": conf.endpoint, "timeout": conf.timeout, "auth": auth, "retry": retry}
        out.append((_shown(conf.url), HttpTransport(HttpConfig.from_dict(params))))
    if conf.file:
        out.append((conf.file, FileTransport(FileConfig(log_file_path=conf.file, append=True))))
    return out


def _shown(url: str) -> str:
    """``url`` as logs show it: without a user part."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class _Worker:
    """One destination's thread. It calls the transport itself, not an ``OpenLineageClient``: the
    client would also follow ``OPENLINEAGE_*`` variables and an ``openlineage.yml`` in the working
    directory, which may send elsewhere or add facets the run never meant to send."""

    def __init__(self, where: str, transport: Transport) -> None:
        self.where = where
        self.transport = transport
        self.queue: queue.Queue[RunEvent | None] = queue.Queue()
        self.failed = 0
        self.thread = threading.Thread(target=self._loop, name="lineage", daemon=True)
        self.thread.start()

    def put(self, event: RunEvent) -> None:
        self.queue.put(event)

    def _loop(self) -> None:
        while (event := self.queue.get()) is not None:
            try:
                self.transport.emit(event)
            except Exception as exc:  # the run goes on; its lineage is a report, not its outcome
                self.failed += 1
                level = logging.WARNING if self.failed == 1 else logging.DEBUG
                what = f"{event.eventType} of {event.job.name}"
                log.log(level, "lineage: sending %s to %s failed: %s", what, self.where, exc)

    def close(self, deadline: float) -> None:
        self.queue.put(None)
        self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread.is_alive():
            log.warning("lineage: %d event(s) to %s not sent in time (lineage.timeout)", self.queue.qsize(), self.where)
        elif self.failed > 1:
            log.warning("lineage: %d event(s) to %s could not be sent", self.failed, self.where)


@dataclass
class DagLineage:
    """The events of one job run's DAGs: :meth:`on_progress` listens to the run's board."""

    sender: Sender
    spec: JobSpec
    run_id: str
    parent: Parent | None = None
    mask: Callable[[str], str] = lambda text: text
    _started: set[str] = field(default_factory=set)
    _ended: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def namespace(self) -> str:
        return self.sender.conf.namespace

    def on_progress(self, p: DagProgress) -> None:
        """The board's listener: never raises into the run (an event it cannot build is logged)."""
        try:
            with self._lock:
                if p.phase in (PLANNING, RUNNING) and p.name not in self._started | self._ended:
                    self._started.add(p.name)
                    self.sender.send(self._event(p.name, RunState.START))
                elif p.finished and p.name not in self._ended:
                    self._ended.add(p.name)
                    self.sender.send(self._event(p.name, event_type(p.phase), p.result, p.message))
        except Exception as exc:
            log.warning("lineage: no event for dag %s (%s): %s", p.name, p.phase, exc)

    def close(self, why: str = "") -> None:
        """A ``FAIL`` for each DAG that started and never ended (the run raised), then wait for
        what is queued."""
        try:
            with self._lock:
                for name in sorted(self._started - self._ended):
                    self._ended.add(name)
                    self.sender.send(self._event(name, RunState.FAIL, None, why or "the run ended before the DAG did"))
        except Exception as exc:
            log.warning("lineage: no end event: %s", exc)
        self.sender.close()

    def _event(self, name: str, state: RunState, result: DagResult | None = None, message: str = "") -> RunEvent:
        dag = next(d for d in self.spec.dags if d.name == name)
        job = f"{self.spec.name}.{name}"
        facets: dict[str, Any] = {
            "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
                version=__version__, name="engine", openlineageAdapterVersion=CLIENT_VERSION, producer=PRODUCER
            )
        }
        if self.parent is not None:
            facets["parent"] = self.parent.facet()
        unsuccessful = state in (RunState.FAIL, RunState.ABORT) or (
            result is not None and result.status == Status.PARTIAL
        )
        if unsuccessful and message:
            facets["errorMessage"] = _error(self.mask(message))
        return RunEvent(
            eventType=state,
            eventTime=_now(),
            run=Run(runId=run_uuid(job, self.run_id), facets=facets),
            job=_job(self.namespace, job, "DAG"),
            inputs=_inputs(dag, result if state == RunState.COMPLETE else None, result),
            outputs=_outputs(dag, result),
            producer=PRODUCER,
        )


@dataclass
class FlowLineage:
    """The events of one flow execution: :meth:`start`, then :meth:`end`; its hops' DAG events
    name it as their parent (:attr:`parent`)."""

    sender: Sender
    job: str
    run_id: str
    parent: Parent | None = None
    mask: Callable[[str], str] = lambda text: text

    @property
    def as_parent(self) -> Parent:
        return Parent(self.sender.conf.namespace, self.job, run_uuid(self.job, self.run_id))

    def start(self) -> None:
        self.sender.send(self._event(RunState.START))

    def end(self, status: str, message: str = "") -> None:
        self.sender.send(self._event(event_type(status), message if status != Status.SUCCEEDED else ""))
        self.sender.close()

    def _event(self, state: RunState, message: str = "") -> RunEvent:
        facets: dict[str, Any] = {}
        if self.parent is not None:
            facets["parent"] = self.parent.facet()
        if message:
            facets["errorMessage"] = _error(self.mask(message))
        return RunEvent(
            eventType=state,
            eventTime=_now(),
            run=Run(runId=self.as_parent.run_id, facets=facets),
            job=_job(self.sender.conf.namespace, self.job, "FLOW"),
            producer=PRODUCER,
        )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _job(namespace: str, name: str, kind: str) -> Job:
    facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="ENGINE", jobType=kind, producer=PRODUCER
        )
    }
    return Job(namespace=namespace, name=name, facets=facets)


def _inputs(dag: AnyDagSpec, completed: DagResult | None, result: DagResult | None) -> list[InputDataset]:
    """What the DAG reads; with the result of a ``completed`` run, what it read (records, or files
    for a copy, and bytes) when it reads one dataset; and how each quality test came out."""
    names = _read(dag)
    facets: dict[str, Any] = {}
    if completed is not None and len(names) == 1:
        copied = dag.kind == "copy"
        facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=None if copied else completed.processed,
            fileCount=completed.processed if copied else None,
            size=getattr(completed, "bytes_read", None),
            producer=PRODUCER,
        )
    verdicts = getattr(result, "verdicts", None)
    if verdicts:
        facets["dataQualityAssertions"] = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=[_assertion(v) for v in verdicts], producer=PRODUCER
        )
    read = [
        InputDataset(namespace=n.namespace, name=n.name, facets=_schema(completed, ""), inputFacets=facets)
        for n in names
    ]
    return read + [InputDataset(namespace=n.namespace, name=n.name) for n in dag.references()]


def _assertion(v: Verdict) -> data_quality_assertions_dataset.Assertion:
    """A quality test as OpenLineage asserts it: a gate is ``custom_sql`` (its SQL the content), a
    rule that can refuse a batch ``rule``, the error budget ``error_budget``; each refuses a batch."""
    gate = v.kind == "gate"
    return data_quality_assertions_dataset.Assertion(
        assertion={"gate": "custom_sql", "budget": "error_budget"}.get(v.kind, v.kind),
        success=v.passed,
        name=v.test,
        severity="error",
        description=v.why or None,
        content=v.test if gate else None,
        contentType="sql" if gate else None,
    )


def _read(dag: AnyDagSpec) -> list[DatasetName]:
    if dag.kind == "copy":
        return [of_path(dag.copy.source)]  # type: ignore[union-attr]
    return dag.source.conf.lineage()  # type: ignore[union-attr]


def _outputs(dag: AnyDagSpec, result: DagResult | None) -> list[OutputDataset]:
    written = result.sinks if result is not None else {}
    out: list[OutputDataset] = []
    if dag.kind == "copy":
        return [OutputDataset(namespace=n.namespace, name=n.name) for n in map(of_path, dag.writes())]
    for sink in dag.sinks:  # type: ignore[union-attr]
        stats: dict[str, Any] = {}
        if sink.name in written:
            stats["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=written[sink.name], producer=PRODUCER
            )
        facets = _schema(result, sink.name)
        out += [
            OutputDataset(namespace=n.namespace, name=n.name, facets=facets, outputFacets=stats)
            for n in sink.conf.lineage()
        ]
    if dag.error_table:
        n = of_path(dag.error_table)
        stats = {}
        if result is not None and result.status in (Status.SUCCEEDED, Status.PARTIAL):
            stats["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=result.rejected, producer=PRODUCER
            )
        out.append(OutputDataset(namespace=n.namespace, name=n.name, outputFacets=stats))
    return out


def _schema(result: DagResult | None, key: str) -> dict[str, Any]:
    """The ``schema`` facet of what the result says was read (``key`` ``""``) or a sink staged."""
    columns = getattr(result, "schemas", {}).get(key)
    if not columns:
        return {}
    fields = [schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in columns]
    return {"schema": schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)}


def _error(message: str) -> Any:
    """The ``errorMessage`` run facet of a run that did not succeed (``message`` already masked)."""
    return error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage="python", producer=PRODUCER)
