"""What a records DAG's run carries from step to step (its plan, the groups it read) and what it
reports (:class:`RecordsResult`, one :class:`~engine.runtime.dag.DatasetOutcome` per dataset)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef, Staged
from engine.forks.fork import BranchCounts
from engine.forks.quality import Verdict
from engine.runtime.dag import DagPlan, DagResult, DatasetOutcome
from engine.runtime.scope import DagScope
from engine.runtime.stop import Stop
from engine.sources.workunits import MultiWorkUnit, WorkUnit
from engine.state.status import Status, dag_outcome
from engine.state.store import utcnow

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from engine.runtime.records.parts import Parts


@dataclass
class RecordsPlan(DagPlan):
    """A records DAG's plan: its units, the schema it reads them with and the fork's predicates."""

    schema: StructType | None = None
    """``None``: nothing to read this run, and no declared schema to check against or a check
    that passed before."""
    predicates: dict[str, Column] = field(default_factory=dict)


@dataclass
class RecordsResult(DagResult):
    """A records DAG's result: the records its committed datasets read, rejected and dropped."""

    records_read: int = 0
    records_rejected: int = 0
    records_dropped: int = 0
    flagged: dict[str, int] = field(default_factory=dict)
    """The records each counted rule (``action`` other than ``reject``, or a ``max_rejected``)
    flagged, over every dataset read, published or refused."""
    verdicts: list[Verdict] = field(default_factory=list)
    """Each quality test (:class:`~engine.forks.quality.Verdict`) over every dataset read."""
    schemas: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """The columns (name, Spark SQL type) the source was read with (key ``""``) and each sink staged."""

    @property
    def processed(self) -> int:
        return self.records_read

    @property
    def rejected(self) -> int:
        return self.records_rejected

    @property
    def dropped(self) -> int:
        return self.records_dropped

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if self.flagged:
            out["rules"] = self.flagged
        return out


@dataclass
class Run:
    """What one run's steps share (passed along, never kept on the DAG)."""

    plan: RecordsPlan
    batch: BatchRef
    scope: DagScope
    stop: Stop
    started: float = field(default_factory=time.monotonic)
    schemas: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Each staged sink's columns (name, Spark SQL type)."""
    early: dict[str, Staged] = field(default_factory=dict)
    """What a sink staged while the records were read (:mod:`~engine.runtime.records.single_pass`),
    by sink: staging takes it, or throws it away, and so does the end of the run."""


@dataclass
class Group:
    """One multi-work-unit after reading: its persisted frame and per-dataset counts, or why it failed."""

    group: MultiWorkUnit
    frame: DataFrame | None = None
    cached: DataFrame | None = None  # what is persisted of ``frame`` (packed), to unpersist
    counts: dict[str, BranchCounts] = field(default_factory=dict)
    error: str = ""
    refused: dict[str, str] = field(default_factory=dict)
    """Datasets read fine whose batch failed a quality gate, and why (nothing of them publishes)."""
    start: datetime = field(default_factory=utcnow)
    end: datetime = field(default_factory=utcnow)


def outcome(unit: WorkUnit, g: Group, status: Status, message: str) -> DatasetOutcome:
    """``unit``'s outcome, with the counts its group read of it."""
    counts = g.counts.get(unit.dataset)
    return DatasetOutcome(
        unit=unit,
        status=status,
        message=message,
        records=counts.read if counts else 0,
        rejected=counts.by_branch.get("error", 0) if counts else 0,
        dropped=counts.dropped if counts else 0,
        start_time=g.start,
        end_time=g.end,
    )


def result_of(
    parts: Parts,
    outcomes: list[DatasetOutcome],
    written: dict[str, int],
    started: float,
    *,
    message: str = "",
    read: Sequence[Group] = (),
) -> RecordsResult:
    """The DAG's result over ``outcomes``; with the groups ``read``, what its rules flagged and
    how its quality tests came out too."""
    committed = [o for o in outcomes if o.status == Status.COMMITTED]
    return RecordsResult(  # read: published or not (a refused batch read its records too); rejected: kept
        name=parts.name,
        status=dag_outcome((o.status for o in outcomes), published=bool(committed)),
        message=message,
        records_read=sum(o.records for o in outcomes),
        records_rejected=sum(o.rejected for o in committed),
        records_dropped=sum(o.dropped for o in committed),
        sinks=written,
        seconds=time.monotonic() - started,
        datasets=sorted(outcomes, key=lambda o: o.unit.dataset),
        flagged=_flagged(read),
        verdicts=_verdicts(parts, read),
    )


def cancelled(parts: Parts, units: list[WorkUnit], started: float, reason: str) -> RecordsResult:
    """The result of a run stopped before publishing: nothing staged, every dataset cancelled."""
    why = f"cancelled: {reason}; nothing was published, the next run reads it again"
    result = result_of(parts, [DatasetOutcome(u, Status.CANCELLED, why) for u in units], {}, started, message=why)
    result.status = Status.CANCELLED
    return result


def unpublished(parts: Parts, result: RecordsResult, message: str) -> RecordsResult:
    """``result`` after its publishing failed: what was to commit did not."""
    outcomes = [
        replace(o, status=Status.FAILED, message=message) if o.status == Status.COMMITTED else o
        for o in result.datasets
    ]
    out = result_of(parts, outcomes, {}, time.monotonic() - result.seconds, message=message)
    out.flagged, out.verdicts = result.flagged, result.verdicts  # what was read stays as it was
    return out


def columns_of(schema: StructType) -> list[tuple[str, str]]:
    """A schema's top-level columns and their Spark SQL types."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _verdicts(parts: Parts, read: Sequence[Group]) -> list[Verdict]:
    """Each quality test's outcome over every dataset read: failed if it failed on one."""
    out: dict[str, Verdict] = {}
    for g in read:
        for c in g.counts.values():
            rejected = c.by_branch.get("error", 0)
            for v in parts.fork.quality.verdicts(read=c.read, rejected=rejected, flagged=c.flagged, gates=c.gates):
                if v.test not in out or (out[v.test].passed and not v.passed):
                    out[v.test] = v
    return list(out.values())


def _flagged(read: Sequence[Group]) -> dict[str, int]:
    """The records each counted rule flagged, over every group read."""
    out: dict[str, int] = {}
    for g in read:
        for counts in g.counts.values():
            for step, n in counts.flagged.items():
                out[step] = out.get(step, 0) + n
    return out
