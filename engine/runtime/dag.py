"""One DAG protocol: what the JobManager and the MetadataManager know of any DAG.

A records DAG (:class:`~engine.runtime.records.RecordsDag`) and a copy DAG
(:class:`~engine.runtime.copydag.CopyDag`) differ in what they read and how they stage it; the
runtime around them does not. Each is planned (``plan() -> plan value``), stored in the commit log
by its fingerprint and work units, run (``run(plan) -> result``), and published through the commit
sequence its result carries, which also sets the result's high marks. A plan's data lives in the
plan value: nothing is kept on the DAG between ``plan()`` and ``run()``, so a stored plan taken
again by a later run is the whole of what that run needs.

:func:`dag_for` is the one place a DAG spec's kind picks its class (imported lazily, as the
plugin registries do: compiling a job never imports pyspark).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.commit.batch import Staged
from engine.sources.workunits import WorkUnit
from engine.state.status import Status
from engine.state.store import utcnow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.commit.batch import BatchRef
    from engine.runtime.scope import DagScope
    from engine.runtime.stop import Stop
    from engine.sources.base import PlanContext
    from engine.sources.conf import SourceLimitsConf
    from engine.spec.model import AnyDagSpec


Connections = Callable[[str], dict[str, Any]]
"""A URL's options (an object store's endpoint and credentials, as ``engine.copy.fs.resolve`` takes
them) from the run's named connections; ``{}`` when none serves it."""


def _no_connection(url: str) -> dict[str, Any]:
    return {}


@dataclass
class DatasetOutcome:
    """What one dataset (work unit) of a run came to: its status row's content."""

    unit: WorkUnit
    status: Status
    message: str = ""
    records: int = 0
    """Records read, or files published by a copy DAG."""
    rejected: int = 0
    dropped: int = 0
    start_time: datetime = field(default_factory=utcnow)
    end_time: datetime = field(default_factory=utcnow)


@dataclass
class DagPlan:
    """What ``run()`` executes: the work units stored in the commit log, and (in subclasses) what
    planning found that the run needs (a schema and predicates, or listings and manifests)."""

    units: list[WorkUnit]
    references: dict[str, int] = field(default_factory=dict)
    """The version of each reference the steps read (a lookup's Delta table, by step), stored
    with the plan so a re-executed batch reads what it read the first time."""


@dataclass
class DagResult:
    """What every DAG reports: its status, one outcome per dataset, what it staged for the commit
    sequence, and what each output received. A DAG that never ran (blocked, skipped, failed while
    planning) reports this base with no datasets.

    A kind of DAG says what it moved (:attr:`processed`), rejected and dropped. The run history,
    the FlowStatus row and the JSON summary keep these under the names they had before copy DAGs
    existed (``records_read``, ``records_rejected``, ``records_dropped``), mapped in
    :meth:`as_dict` and by the JobManager and the Publisher."""

    name: str
    status: Status
    message: str = ""
    sinks: dict[str, int] = field(default_factory=dict)
    """What each output received (a sink's records, a copy target's files)."""
    seconds: float = 0.0
    datasets: list[DatasetOutcome] = field(default_factory=list)
    staged: list[Staged] = field(default_factory=list)
    """What the DAG staged for the commit sequence (nothing is visible yet)."""
    recovered: list[int] = field(default_factory=list)
    """Batches left unpublished by earlier runs that this run's recovery published."""

    @property
    def processed(self) -> int:
        """What the DAG moved: a records DAG's records read, a copy DAG's files published."""
        return 0

    @property
    def rejected(self) -> int:
        """Records sent to the error table (a records DAG's)."""
        return 0

    @property
    def dropped(self) -> int:
        """Records the chain dropped on purpose (a records DAG's duplicates, under ``dedupe``)."""
        return 0

    @property
    def records_written(self) -> int:
        return sum(self.sinks.values())

    @property
    def executor_seconds(self) -> float:
        """What the DAG's reads cost, in executor seconds (the next run's ordering uses it)."""
        return sum(o.unit.executor_seconds for o in self.datasets)

    @property
    def bytes_read(self) -> int:
        """Bytes of input its committed datasets read (as planned: a unit's size)."""
        return sum(d.unit.size.bytes or 0 for d in self.datasets if d.status == Status.COMMITTED)

    def as_dict(self) -> dict[str, Any]:
        by_status: dict[str, int] = {}
        for d in self.datasets:
            by_status[d.status.value] = by_status.get(d.status.value, 0) + 1
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "records_read": self.processed,
            "records_rejected": self.rejected,
            "records_dropped": self.dropped,
            "sinks": self.sinks,
            "datasets": by_status,
            "failed_datasets": [d.unit.dataset for d in self.datasets if d.status == Status.FAILED],
            "bytes_read": self.bytes_read,
            # what a committed dataset's status row notes (throttled, a skipped file, a gap in Kafka)
            "notes": {d.unit.dataset: d.message for d in self.datasets if d.status == Status.COMMITTED and d.message},
            "recovered_batches": self.recovered,
            "seconds": round(self.seconds, 3),
            "executor_seconds": round(self.executor_seconds, 3),
        }


PlanT = TypeVar("PlanT", bound=DagPlan)
ResultT = TypeVar("ResultT", bound=DagResult)


class Dag(ABC, Generic[PlanT, ResultT]):
    """A DAG of a job, as the runtime drives it: plan, run, publish (by the caller), report.

    :func:`dag_for` builds the right one for a spec."""

    def __init__(self, spec: AnyDagSpec, *, job: str, run_id: str, connections: Connections | None = None) -> None:
        self.spec = spec
        self.job = job
        self.run_id = run_id
        self.connections: Connections = connections or _no_connection
        """Options (credentials) for a URL from the run's named connections."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    @abstractmethod
    def scope(self) -> str:
        """Whose state the DAG reads and advances: live, or a backfill's."""

    @property
    def limits(self) -> SourceLimitsConf | None:
        """The DAG's own throttling; ``None``: only the job's budget applies."""
        return None

    def locations(self) -> dict[str, object]:
        """The file systems its commit steps reach by URL, opened with the options (credentials)
        of its config: the publisher hands them to the steps (:attr:`StepContext.locations
        <engine.commit.steps.StepContext.locations>`). None by default."""
        return {}

    def owned_places(self, result: ResultT) -> list[tuple[str, bool]]:
        """The places its sinks published ``result`` to that a job owns (:mod:`engine.commit.owners`),
        each with whether the sink shares it with other jobs. None by default."""
        return []

    @abstractmethod
    def fingerprint(self) -> str:
        """What a stored plan depends on: a plan stored under another fingerprint is planned anew."""

    def validate(self, spark: SparkSession, *, inputs_may_not_exist: frozenset[str] = frozenset()) -> None:
        """Check the config as :meth:`plan` does, listing and reading nothing (``inputs_may_not_exist``:
        the input paths an upstream DAG writes, which need not exist yet). Nothing by default."""
        return None

    @abstractmethod
    def plan(
        self,
        spark: SparkSession,
        ctx: PlanContext,
        *,
        reuse: list[WorkUnit] | None = None,
        references: dict[str, int] | None = None,
    ) -> PlanT:
        """This run's plan over the state in ``ctx`` (``reuse``: an open plan's units, taken
        again, with the ``references`` it read)."""

    @abstractmethod
    def run(
        self,
        spark: SparkSession,
        plan: PlanT,
        batch: BatchRef,
        *,
        scope: DagScope | None = None,
        stop: Stop | None = None,
        on_read: Callable[[int], None] = lambda n: None,
    ) -> ResultT:
        """Execute ``plan`` and stage its output for ``batch``'s commit sequence; once ``stop`` is
        set nothing more is staged and the result is ``CANCELLED``."""

    @abstractmethod
    def high_marks(self, result: ResultT) -> dict[str, str]:
        """The new watermark (JSON) of each dataset ``result`` commits, set by the commit sequence."""

    def files_read(self, result: ResultT) -> list[list[Any]]:
        """``[dataset, path, mtime ms, size, note]`` rows for the file log (none by default)."""
        return []

    @abstractmethod
    def cancelled(self, units: list[WorkUnit], started: float, reason: str) -> ResultT:
        """The result of a run stopped (for ``reason``) before publishing: nothing staged."""

    @abstractmethod
    def unpublished(self, result: ResultT, message: str) -> ResultT:
        """``result`` after its publishing failed: what was to commit did not."""


AnyDag = Dag[Any, Any]
"""Any kind of DAG, as the JobManager and the MetadataManager hold them."""

DAG_CLASSES: dict[str, str] = {
    "records": "engine.runtime.records:RecordsDag",
    "copy": "engine.runtime.copydag:CopyDag",
}
"""A DAG spec's ``kind`` -> its class, as ``module:Class`` (imported when first used)."""


def dag_for(spec: AnyDagSpec, *, job: str, run_id: str, connections: Connections | None = None) -> AnyDag:
    """The DAG that runs ``spec``; ``connections`` gives a URL's options from the run's named
    connections (``storage.connections``)."""
    module, _, name = DAG_CLASSES[spec.kind].partition(":")
    cls: type[AnyDag] = getattr(import_module(module), name)
    return cls(spec, job=job, run_id=run_id, connections=connections)
