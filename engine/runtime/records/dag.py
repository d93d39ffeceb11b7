"""A records DAG: plan work units -> read -> convert -> fork -> stage, for one source.

:meth:`RecordsDag.plan` asks the source for this run's work units and checks the chain
(:mod:`~engine.runtime.records.planning`); :meth:`RecordsDag.run` packs the units into
multi-work-units, reads them (:mod:`~engine.runtime.records.reading`, or, for one group of one
dataset, :mod:`~engine.runtime.records.single_pass`), and applies the publish policy
(:mod:`~engine.runtime.records.publishing`), which stages the groups that read fine
(:mod:`~engine.runtime.records.staging`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef, Staged
from engine.runtime.dag import Connections, Dag, DatasetOutcome
from engine.runtime.records import planning, publishing, reading, single_pass, staging
from engine.runtime.records.parts import Parts
from engine.runtime.records.results import Group, RecordsPlan, RecordsResult, Run, cancelled, result_of, unpublished
from engine.runtime.scope import DagScope, scope_for
from engine.runtime.stop import Stop
from engine.sinks.conf import TableSinkConf
from engine.sources.base import PlanContext
from engine.sources.conf import SourceLimitsConf
from engine.sources.workunits import MultiWorkUnit, WorkUnit, pack
from engine.spec import DagSpec
from engine.state.status import Status
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class RecordsDag(Dag[RecordsPlan, RecordsResult]):
    """A records DAG: one source's records through converters and forks into sinks."""

    def __init__(self, spec: DagSpec, *, job: str, run_id: str, connections: Connections | None = None) -> None:
        super().__init__(spec, job=job, run_id=run_id, connections=connections)
        self.spec: DagSpec = spec
        self.parts = Parts.of(spec, job=job, run_id=run_id)
        self.source, self.steps, self.sinks = self.parts.source, self.parts.steps, self.parts.sinks
        self.fork, self.ctx = self.parts.fork, self.parts.ctx

    @property
    def scope(self) -> str:
        return self.source.scope

    @property
    def limits(self) -> SourceLimitsConf:
        return self.source.conf.limits

    def locations(self) -> dict[str, object]:
        """What its sinks' commit steps may not store (a database's login), those it no longer
        writes included: a batch of theirs left unfinished is finished on its next run."""
        left = [sk.entry.load()(sk.conf, name=sk.name, key=sk.key) for sk in self.spec.unwritten]
        return {key: found for sink in [*self.sinks, *left] for key, found in sink.locations(self.name).items()}

    def owned_places(self, result: RecordsResult) -> list[tuple[str, bool]]:
        """The places of its table sinks that published ``result`` (a sink with an empty branch
        leaves its place as it was), but those its plan found the job owns already, as it shares them."""
        published = {getattr(step, "sink", None) for staged in result.staged for step in staged.steps}
        return [
            (s.conf.path, s.conf.shared)
            for s in self.sinks
            if isinstance(s.conf, TableSinkConf)
            and s.name in published
            and (s.conf.path, s.conf.shared) not in self.parts.owned
        ]

    def fingerprint(self) -> str:
        """What a stored plan depends on: the source's name and config."""
        text = f"{self.source.name}\n{self.source.conf.model_dump_json()}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def high_marks(self, result: RecordsResult) -> dict[str, str]:
        """The new watermark (JSON) of each dataset the result commits that moved."""
        marks: dict[str, str] = {}
        for o in result.datasets:
            if o.status != Status.COMMITTED:
                continue  # failed, rolled back and empty units keep their stored watermark
            high = self.source.actual_high(o.unit)
            if high is not None and high != o.unit.low:
                marks[o.unit.dataset] = high.to_json()
        return marks

    def files_read(self, result: RecordsResult) -> list[list[Any]]:
        """``[dataset, path, mtime ms, size, note]`` of each file the committed datasets read."""
        return [
            [o.unit.dataset, *file]
            for o in result.datasets
            if o.status == Status.COMMITTED
            for file in self.source.files_read(o.unit)
        ]

    def validate(self, spark: SparkSession, *, inputs_may_not_exist: frozenset[str] = frozenset()) -> None:
        planning.validate(self.parts, spark, inputs_may_not_exist=inputs_may_not_exist)

    def plan(
        self,
        spark: SparkSession,
        ctx: PlanContext,
        *,
        reuse: list[WorkUnit] | None = None,
        references: dict[str, int] | None = None,
    ) -> RecordsPlan:
        return planning.plan(self.parts, spark, ctx, reuse=reuse, references=references)

    def run(
        self,
        spark: SparkSession,
        plan: RecordsPlan,
        batch: BatchRef,
        *,
        scope: DagScope | None = None,
        stop: Stop | None = None,
        on_read: Callable[[int], None] = lambda records: None,
    ) -> RecordsResult:
        """Read, convert and stage ``plan``; every Spark job runs in ``scope`` (pool, tag). Once
        ``stop`` is set nothing more is read and nothing is staged: the result is ``CANCELLED``."""
        run = Run(plan, batch, scope or scope_for(self.run_id, self.name, self.spec.pool_name), stop or Stop())
        groups = pack(plan.units, max_groups=self.spec.work_units.max_groups) if plan.schema is not None else []
        outcomes = [DatasetOutcome(u, Status.EMPTY, u.note) for u in plan.units if u.empty]
        if not groups:
            return result_of(self.parts, outcomes, {}, run.started)
        read: list[Group] = []
        try:
            read = self._read(spark, run, groups)
            on_read(sum(c.read for g in read for c in g.counts.values()))
            if run.stop.is_set():
                return self.cancelled(plan.units, run.started, run.stop.reason)
            return publishing.publish(self.parts, spark, run, read, outcomes, self.stage)
        finally:
            staging.discard_early(self.parts, run, HadoopFs(spark))
            for g in read:
                if g.cached is not None:
                    g.cached.unpersist()
            for step in self.steps:
                step.release()

    def _read(self, spark: SparkSession, run: Run, groups: list[MultiWorkUnit]) -> list[Group]:
        """The groups read: in one pass with a sink's staging when that sink can count while it
        writes, else each read and counted on its own (also when that pass failed: counting first
        names the failure and isolates it as usual)."""
        sink = single_pass.counting_sink(self.parts, groups)
        if sink is not None and not run.stop.is_set():
            read = single_pass.read_while_staging(self.parts, spark, run, groups[0], sink)
            if read is not None:
                return [read]
        return reading.read_groups(self.parts, spark, run, groups)

    def stage(
        self, spark: SparkSession, run: Run, ok: list[Group], refused: dict[str, str]
    ) -> tuple[list[Staged], dict[str, int]]:
        """Stage the ``ok`` groups less the ``refused`` datasets (:func:`~engine.runtime.records.staging.stage`)."""
        return staging.stage(self.parts, spark, run, ok, refused)

    def cancelled(self, units: list[WorkUnit], started: float, reason: str) -> RecordsResult:
        return cancelled(self.parts, units, started, reason)

    def unpublished(self, result: RecordsResult, message: str) -> RecordsResult:
        return unpublished(self.parts, result, message)
