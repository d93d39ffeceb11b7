"""A JobDag: plan work units -> read -> convert -> fork -> stage, for one source.

``plan()`` asks the source for this run's work units (from the stored state), fixes the schema,
and builds and checks the whole chain on an empty frame of that schema: every config mistake
surfaces there, before any data is read or written. ``run()`` then packs the units into
multi-work-units; each is read, converted, persisted and counted per dataset as one Spark job
(the unit of failure; a failed group of several units is retried one unit at a time so one bad
dataset does not hold others back). A run of one group of one dataset has nothing to isolate: it
counts while its first table sink stages, in that sink's job (:meth:`JobDag._read_staging`). The
publish policy then decides: under ``full`` any failure stages nothing; under ``partial`` the
groups that read fine are staged, once per sink. Staged data
is invisible to readers: the caller publishes it through a commit sequence
(:mod:`engine.runtime.metadata`), which also advances the committed datasets' watermarks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from engine.commit.batch import BatchRef, Staged
from engine.commit.killpoints import kill_point
from engine.commit.owners import check_owner
from engine.commit.steps import DeltaWrite, user_metadata
from engine.converters.base import Converter, checking, first_line
from engine.converters.frame import DATASET, FILE, finalize, packed, to_frame, unpacked
from engine.forks.fork import BranchCounts, ErrorContext, Fork, merged_origins
from engine.forks.quality import Quality, Verdict
from engine.forks.repeats import rejected_by_sinks
from engine.runtime import faults
from engine.runtime.chainkey import chain_key, sql_settings
from engine.runtime.dag import Connections, Dag, DagPlan, DagResult, DatasetOutcome
from engine.runtime.metrics import executor_seconds, stages_retried
from engine.runtime.scope import DagScope, scope_for
from engine.runtime.sqlcheck import check_parses
from engine.runtime.stop import Stop
from engine.sinks.base import Sink
from engine.sinks.conf import TableSinkConf
from engine.sinks.contract import SchemaContractError
from engine.sinks.error_table import RECORD_ID, ErrorTable, ReplayedTable, held_scope
from engine.sources.appended import READ_AGAIN
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, PlanContext, Source
from engine.sources.conf import SourceLimitsConf
from engine.sources.error_rows import ErrorRowsSource
from engine.sources.workunits import MultiWorkUnit, WorkUnit, pack
from engine.spec import DagSpec
from engine.spec.places import METADATA_DIR
from engine.state.status import Status, dag_outcome
from engine.state.store import utcnow
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


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
class _Run:
    """What one run's steps share (passed along, never kept on the DAG)."""

    plan: RecordsPlan
    batch: BatchRef
    scope: DagScope
    stop: Stop
    started: float = field(default_factory=time.monotonic)
    schemas: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Each staged sink's columns (name, Spark SQL type)."""


@dataclass
class _Group:
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


@dataclass
class _ReadStaging:
    """A group read while a sink staged it: what was read, and that sink's staged output."""

    read: _Group
    sink: str
    output: Staged

    @property
    def staged(self) -> tuple[str, Staged]:
        return self.sink, self.output


class JobDag(Dag[RecordsPlan, RecordsResult]):
    """A records DAG: one source's records through converters and forks into sinks."""

    def __init__(self, spec: DagSpec, *, job: str, run_id: str, connections: Connections | None = None) -> None:
        super().__init__(spec, job=job, run_id=run_id, connections=connections)
        self.spec: DagSpec = spec
        s = spec.source
        self.source: Source = s.entry.load()(s.conf, name=s.name, key=s.key, schema_ddl=s.schema_ddl)
        self.steps: list[Converter] = [st.entry.load()(st.conf, step=st.name, key=st.key) for st in spec.steps]
        self.sinks: list[Sink] = [sk.entry.load()(sk.conf, name=sk.name, key=sk.key) for sk in spec.sinks]
        if spec.warehouse:
            self.source.scratch = scratch_of(spec.warehouse, job, spec.name)
        self._owned: set[tuple[str, bool]] = set()
        """The places (and how shared) its plan found the job owns (:meth:`owned_places`)."""
        rules = [step.rule() for step in self.steps]
        quality = Quality.of(rules, max_rejected=spec.max_rejected, gates=list(spec.gates), key=spec.key)
        self.fork = Fork(spec.branches, key=spec.key, quality=quality)
        self.ctx = ErrorContext(job=job, dag=spec.name, run_id=run_id, source=s.name)

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
            and (s.conf.path, s.conf.shared) not in self._owned
        ]

    def _check_owners(self, spark: SparkSession) -> None:
        """Refuse a place another job owns (:func:`~engine.commit.owners.check_owner`), before
        anything is read; note those the job owns already (no need to claim them again)."""
        fs = HadoopFs(spark)
        for sink in self.sinks:
            if isinstance(sink.conf, TableSinkConf):
                c, what = sink.conf, f"sink `{sink.name}` of job `{self.job}`"
                key, within = f"{sink.key}.path", self.spec.warehouse
                owner = check_owner(fs, c.path, job=self.job, shared=c.shared, what=what, key=key, within=within)
                if owner is not None and owner.job == self.job and owner.shared == c.shared:
                    self._owned.add((c.path, c.shared))

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

    # -- planning ------------------------------------------------------------------------------

    def plan(
        self,
        spark: SparkSession,
        ctx: PlanContext | None = None,
        *,
        validate_only: bool = False,
        reuse: list[WorkUnit] | None = None,
        references: dict[str, int] | None = None,
        inputs_may_not_exist: frozenset[str] = frozenset(),
    ) -> RecordsPlan | None:
        """Plan the run's work units (or take ``reuse``, an earlier run's stored plan) and check
        the chain. In validate mode nothing is listed or read: a schema that would need a Spark
        job to infer is skipped and SQL only parsed, or the chain checked over a declared schema (as
        it is when some of ``inputs_may_not_exist``, the input paths an upstream DAG writes, are among
        the inputs: the source still checks the others, and what needs no input at all). A run skips
        the check when one with the same key passed before (:mod:`engine.runtime.chainkey`); with
        nothing to read, it then reads no schema either. A run's steps read their references
        (:meth:`~engine.converters.base.Converter.pin`) at the versions of ``references``, or, for
        a new plan with something to read, at the versions of now, kept in the plan."""
        if ctx is not None and not validate_only:
            for step in self.steps:
                step.pin(spark, (references or {}).get(step.step))
        plan = self._plan(
            spark, ctx, validate_only=validate_only, reuse=reuse, inputs_may_not_exist=inputs_may_not_exist
        )
        if plan is not None and reuse is None:
            self._name_duplicating_sinks(plan.units)
        if plan is not None and ctx is not None and not validate_only and any(not u.empty for u in plan.units):
            plan.references = {s.step: v for s in self.steps if (v := s.pinned) is not None}
            if reuse is None and plan.references:  # each dataset's status row says what it joined
                read = plan.references.items()
                said = "; ".join(f"step `{step}` read its reference at version {v}" for step, v in read)
                for unit in plan.units:
                    if not unit.empty:
                        unit.note = "; ".join(n for n in (unit.note, said) if n)
        return plan

    def _plan(
        self,
        spark: SparkSession,
        ctx: PlanContext | None,
        *,
        validate_only: bool,
        reuse: list[WorkUnit] | None,
        inputs_may_not_exist: frozenset[str],
    ) -> RecordsPlan | None:
        settings = sql_settings(spark) if ctx is not None and not validate_only else []  # before any read
        self.source.check(spark, not_yet=inputs_may_not_exist)
        self._check_owners(spark)
        if validate_only and (inputs_may_not_exist or self._needs_inference()):
            upstream = {p for st in self.steps for p in st.conf.inputs()} & inputs_may_not_exist
            if self.source.declared_schema() is not None and not upstream:  # a lookup's may not exist yet
                self._check_chain(spark, self.source.schema(spark, None))
                return None
            self._parse_only(spark)
            return None
        if validate_only or ctx is None:
            units: list[WorkUnit] = []
        else:
            units = reuse if reuse is not None else self.source.plan(spark, ctx)
        idle = not validate_only and all(u.empty for u in units)
        declared = self.source.schema_ddl  # the key of a declared schema needs no parse
        key = chain_key(settings, self.spec, declared) if declared is not None and ctx is not None else None
        checked = ctx.checked_chain() if ctx is not None and not validate_only else None
        if idle and key is not None and key == checked:
            return self._checked_before(units)
        pins: list[tuple[str, str]] = []  # an inferred schema is pinned only once the chain checks
        held = replace(ctx, pin_schema=lambda fingerprint, ddl: pins.append((fingerprint, ddl))) if ctx else None
        schema = self.source.schema(spark, None if validate_only else units, held)
        if schema is None:
            self._parse_only(spark)
            return RecordsPlan(units=units, schema=None)
        if ctx is None or validate_only:
            return RecordsPlan(units=units, schema=schema, predicates=self._check_chain(spark, schema))
        key = key or chain_key(settings, self.spec, schema.json())
        if not pins and key == checked:
            if idle:
                return self._checked_before(units)
            log.info("dag %s: its chain passed this check before: not checked again", self.name)
            return RecordsPlan(units=units, schema=schema, predicates=self.fork.predicates(None))
        predicates = self._check_chain(spark, schema)
        for fingerprint, ddl in pins:
            ctx.pin_schema(fingerprint, ddl)
        if checked != key:
            ctx.chain_passed(key)
        return RecordsPlan(units=units, schema=schema, predicates=predicates)

    def _name_duplicating_sinks(self, units: list[WorkUnit]) -> None:
        """A unit reading a file again whole (:data:`~engine.sources.appended.READ_AGAIN`) says
        which sinks then hold its earlier records twice, as a rewind's warning does."""
        twice = [f"sink `{s.name}`" for s in self.sinks if s.conf.on_replay().effect == "DUPLICATES"]
        said = f"sinks that now hold its earlier records twice: {', '.join(twice)}" if twice else ""
        for unit in units:
            if READ_AGAIN in unit.note and said:
                unit.note = f"{unit.note} ({said})"
                log.warning("dag %s: %s: %s", self.name, unit.dataset, unit.note)

    def _checked_before(self, units: list[WorkUnit]) -> RecordsPlan:
        """The plan of a run with nothing to read whose chain passed this check before: no schema,
        so nothing is read."""
        log.info("dag %s: nothing to read, and its chain passed this check before", self.name)
        return RecordsPlan(units=units, schema=None)

    def _check_chain(self, spark: SparkSession, schema: StructType | None) -> dict[str, Column]:
        """Build the chain, the forks and each sink's branch over an empty frame of ``schema``:
        Spark analyses eagerly, so every mistake the records' types reveal raises here."""
        assert schema is not None
        probe = spark.createDataFrame([], schema).withColumn(DATASET, F.lit(None).cast("string"))
        with checking():
            frame = self._chain(probe)
            preds = self.fork.predicates(frame)
            for sink in self.sinks:
                sink.check(self.fork.branch(frame, sink.conf.from_, preds[sink.conf.from_], self.ctx))
        return preds

    def _chain(self, read: DataFrame) -> DataFrame:
        """The converters, then what the sinks reject (a merge's repeated keys), finalized."""
        frame = to_frame(read, corrupt_column=CORRUPT_RECORD, reason_column=CORRUPT_REASON)
        for step in self.steps:
            frame = step.apply(frame)
        return finalize(rejected_by_sinks(frame, self.sinks, self.fork.predicates(None)))

    # -- running -------------------------------------------------------------------------------

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
        run = _Run(plan, batch, scope or scope_for(self.run_id, self.name, self.spec.pool_name), stop or Stop())
        groups = pack(plan.units, max_groups=self.spec.work_units.max_groups) if plan.schema is not None else []
        outcomes = [DatasetOutcome(u, Status.EMPTY, u.note) for u in plan.units if u.empty]
        if not groups:
            return self._result(outcomes, {}, run.started)
        first = self._read_staging(spark, run, groups[0]) if len(groups) == 1 else None
        read = [first.read] if first is not None else self._read_groups(spark, run, groups)
        try:
            on_read(sum(c.read for g in read for c in g.counts.values()))
            if run.stop.is_set():
                if first is not None:
                    _discard(self._sink(first.sink), run.batch, HadoopFs(spark), first.output)
                return self.cancelled(plan.units, run.started, run.stop.reason)
            return self._publish(spark, run, read, outcomes, first.staged if first is not None else None)
        finally:
            for g in read:
                if g.cached is not None:
                    g.cached.unpersist()
            for step in self.steps:
                step.release()

    def _read_groups(self, spark: SparkSession, run: _Run, groups: list[MultiWorkUnit]) -> list[_Group]:
        workers = min(len(groups), self.spec.work_units.parallelism)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{self.name}-wu") as pool:
            done = list(pool.map(lambda ig: self._read_group(spark, run, ig[1], ig[0]), enumerate(groups)))
        out: list[_Group] = []
        for g in done:
            if g.error and len(g.group.units) > 1:  # isolate the failing dataset(s)
                log.warning(
                    "dag %s: a group of %d units failed (%s); retrying them one by one",
                    self.name,
                    len(g.group.units),
                    g.error,
                )
                for i, unit in enumerate(g.group.units):
                    out.append(self._read_group(spark, run, MultiWorkUnit([unit]), 1000 + i))
            else:
                out.append(g)
        return out

    def _read_group(self, spark: SparkSession, run: _Run, group: MultiWorkUnit, index: int) -> _Group:
        job_group = f"{self.run_id}:{self.name}:wu{index}"
        with run.scope.entered(spark.sparkContext, job_group, f"{self.job}/{self.name} {group.datasets[:3]}"):
            return self._read_scoped(spark, run, group, job_group)

    def _read_scoped(self, spark: SparkSession, run: _Run, group: MultiWorkUnit, job_group: str) -> _Group:
        result = _Group(group)
        if run.stop.is_set():
            result.error = f"not read: {run.stop.reason}"
            return result
        try:
            result.frame, result.cached = self._persisted(self._group_frame(spark, run.plan, group))
            result.counts = self.fork.count_by_dataset(
                result.frame, run.plan.predicates, only=group.units[0].dataset, datasets=group.datasets
            )
            result.refused = self._refused(result.counts)
        except Exception as exc:  # the group fails, the run goes on (the policy decides)
            if result.cached is not None:
                result.cached.unpersist()
            result.frame = result.cached = None
            if self.source.skip_unreadable(exc, group.units):  # it dropped the file(s) it cannot read
                return self._read_scoped(spark, run, group, job_group)
            result.error = first_line(exc) + self.source.read_hint(exc)
            log.error(
                "dag %s: reading %s failed: %s",
                self.name,
                ", ".join(group.datasets),
                result.error,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
        result.end = utcnow()
        _share_costs(group, result, executor_seconds(spark, job_group))
        return result

    def _read_staging(self, spark: SparkSession, run: _Run, group: MultiWorkUnit) -> _ReadStaging | None:
        """A run of one group of one dataset reads its records, counts them and stages the first
        sink in one Spark job: the counts are observed while that sink writes (the frame is
        persisted on the way for the other sinks and the error table, if there are any:
        :meth:`_sole_reader`). ``None``: the run is not of that shape, no sink can count while it
        writes, or the job failed (the caller then reads the usual way, counting first, which
        names the failure and isolates it as usual)."""
        sink = self._counting_sink()
        if sink is None or len(group.units) != 1 or run.stop.is_set():
            return None
        job_group = f"{self.run_id}:{self.name}:wu0"
        # Jobs an earlier run under the same run id left in this group (tests, one SparkContext):
        # the stage-retry check must be about this attempt's jobs only.
        earlier = set(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group))
        with run.scope.entered(spark.sparkContext, job_group, f"{self.job}/{self.name} {group.datasets[:3]}"):
            read = _Group(group)
            batch, fs = self._marked(run.batch, [read]), HadoopFs(spark)
            preds, branch = run.plan.predicates, sink.conf.from_
            try:
                frame = self._group_frame(spark, run.plan, group)
                if not self._sole_reader(sink):
                    frame, read.cached = self._persisted(frame)
                # counted where the cache is read, before its engine columns are unpacked
                counted = frame if read.cached is None else read.cached
                observed, observation = self.fork.observed(counted, f"{job_group}:counts")
                observed = unpacked(observed)  # as it is, if nothing was packed or the count unpacked
                rows = self.fork.branch(with_dataset(observed, group), branch, preds[branch], self.ctx)
                staged = sink.stage(rows, batch, fs)
                run.schemas[sink.name] = columns_of(rows.schema)
            except Exception as exc:
                if read.cached is not None:
                    read.cached.unpersist()
                _discard(sink, batch, fs)
                if isinstance(exc, SchemaContractError):  # decided before any read: reading again cannot help
                    raise
                why = first_line(exc)
                log.warning("dag %s: reading into sink %s failed (%s); reading again", self.name, sink.name, why)
                return None
            log.info("dag %s: read, counted and staged sink %s in one pass", self.name, sink.name)
            # A stage run twice may have counted twice: then (or without counts) count the cache.
            retried = stages_retried(spark, job_group, besides=earlier)
            counts = None if retried else self.fork.observed_counts(observation)
            dataset = group.units[0].dataset
            if counts is None:
                log.info("dag %s: counting the persisted records: the write's counts may be off", self.name)
            read.counts = {dataset: counts} if counts else self.fork.count_by_dataset(frame, preds, only=dataset)
            read.refused = self._refused(read.counts)
            read.frame = frame
            read.end = utcnow()
            _share_costs(group, read, executor_seconds(spark, job_group))
        return _ReadStaging(read, sink.name, staged)

    def _counting_sink(self) -> Sink | None:
        """The sink whose staging also reads and counts the records, if one can: of those whose
        writes read their whole branch in one action, one staged even when its branch is empty,
        else one of the ``valid`` branch, else the first."""
        if not self.fork.observable:
            return None
        able = [s for s in self.sinks if s.counts_while_staging]
        ranked = sorted(able, key=lambda s: (not s.conf.stages_empty, s.conf.from_ != "valid"))
        return ranked[0] if ranked else None

    def _sole_reader(self, sink: Sink) -> bool:
        """Whether ``sink`` is all that reads the records (no other sink, no error table, no replay
        marks): then persisting them for the others would cost a pass that nothing reads."""
        others = self.spec.error_table or self.spec.replay_marks
        return len(self.sinks) == 1 and self.sinks[0] is sink and not others

    def _persisted(self, frame: DataFrame) -> tuple[DataFrame, DataFrame | None]:
        """``frame`` read from the cache the spec's ``persist`` level keeps (:func:`packed`: a valid
        record's engine columns cost one null there), and that cache; without ``persist``, as is."""
        if self.spec.persist == "NONE":
            return frame, None
        cached = packed(frame).persist(getattr(StorageLevel, self.spec.persist))
        return unpacked(cached), cached

    def _group_frame(self, spark: SparkSession, plan: RecordsPlan, group: MultiWorkUnit) -> DataFrame:
        """The group's records through the chain, lazily. A group of one dataset reads without its
        URN per record (nothing to carry and persist); it is :func:`with_dataset` that puts it back."""
        assert plan.schema is not None
        read = faults.inject(self.source.read(spark, group.units, plan.schema), group.datasets)
        if len(group.units) == 1:
            read = read.drop(DATASET)
        return self._chain(read)

    def _publish(
        self,
        spark: SparkSession,
        run: _Run,
        read: list[_Group],
        outcomes: list[DatasetOutcome],
        first: tuple[str, Staged] | None,
    ) -> RecordsResult:
        """Apply the publish policy to what was read: roll back, or stage the groups that read fine
        (``first``: a sink staged while reading)."""
        failed = [g for g in read if g.error]
        refused = {d: why for g in read for d, why in g.refused.items()}
        if first is not None and (refused or failed):  # its one dataset was refused
            _discard(self._sink(first[0]), run.batch, HadoopFs(spark), first[1])
            first = None
        if (failed or refused) and self.spec.publish.policy == "full":
            return self._rolled_back(read, outcomes, run.started)
        ok = [g for g in read if not g.error and any(u.dataset not in refused for u in g.group.units)]
        staged: list[Staged] = []
        written: dict[str, int] = {}
        if ok:
            try:
                staged, written = self._stage(spark, run, ok, self._marked(run.batch, ok, refused), first, refused)
            except Exception as exc:  # a sink failed: nothing commits (the rerun reads the same range)
                fs = HadoopFs(spark)
                for sink in self.sinks:  # what the sinks before it staged, thrown away
                    _discard(sink, run.batch, fs)
                return self._staging_failed(run, read, outcomes, exc)
            kill_point("after_staging", self.name)
        for g in read:
            for u in g.group.units:
                if g.error or u.dataset in refused:
                    outcomes.append(self._outcome(u, g, Status.FAILED, g.error or refused[u.dataset]))
                else:
                    outcomes.append(self._outcome(u, g, Status.COMMITTED, self._noted(u, g)))
        why = failed[0].error if failed else next(iter(refused.values()), "")
        result = self._result(outcomes, written, run.started, message=why, read=read)
        used = self.source.scratch if self.source.scratch_used else None
        result.staged = [*staged, Staged([], used)] if staged and used else staged  # what it copied goes with the batch
        read_with = [c for c in columns_of(run.plan.schema) if c[0] != CORRUPT_RECORD] if run.plan.schema else []
        result.schemas = {"": read_with, **run.schemas} if read_with else dict(run.schemas)
        return result

    def _refused(self, counts: dict[str, BranchCounts]) -> dict[str, str]:
        """The datasets whose batch fails a quality gate (:class:`~engine.forks.quality.Quality`), and why."""
        out = {}
        for dataset, c in counts.items():
            rejected = c.by_branch.get("error", 0)
            why = self.fork.quality.judge(read=c.read, rejected=rejected, flagged=c.flagged, gates=c.gates)
            if why:
                out[dataset] = "refused by quality gates: " + "; ".join(why)
                log.error("dag %s: %s: %s", self.name, dataset, out[dataset])
        return out

    def _noted(self, unit: WorkUnit, g: _Group) -> str:
        """A published dataset's status note: the unit's own, and what ``warn`` rules counted."""
        counts = g.counts.get(unit.dataset)
        warned = self.fork.quality.warned(counts.flagged, counts.read) if counts else ""
        return "; ".join(n for n in (unit.note, warned) if n)

    def _sink(self, name: str) -> Sink:
        return next(s for s in self.sinks if s.name == name)

    def _rolled_back(self, read: list[_Group], outcomes: list[DatasetOutcome], started: float) -> RecordsResult:
        """Under ``publish.policy=full`` a failed group, or a dataset refused by a quality gate,
        rolls every other one back."""
        failures = {
            u.dataset: g.error or g.refused[u.dataset]
            for g in read
            for u in g.group.units
            if g.error or u.dataset in g.refused
        }
        what = "dataset(s) failed or were refused" if any(g.refused for g in read) else "group(s) failed"
        count = len(failures) if any(g.refused for g in read) else len([g for g in read if g.error])
        why = f"rolled back: {count} {what} under publish.policy=full"
        for g in read:
            for u in g.group.units:
                if u.dataset in failures:
                    outcomes.append(self._outcome(u, g, Status.FAILED, failures[u.dataset]))
                else:
                    outcomes.append(self._outcome(u, g, Status.ROLLED_BACK, why))
        return self._result(outcomes, {}, started, message=next(iter(failures.values())), read=read)

    def _marked(self, batch: BatchRef, ok: list[_Group], refused: dict[str, str] | None = None) -> BatchRef:
        """``batch`` carrying, in every sink's commit metadata, the high marks the ``ok`` groups
        reach (not those of ``refused`` datasets)."""
        marks = {
            u.dataset: high.to_json()
            for g in ok
            for u in g.group.units
            if u.dataset not in (refused or {}) and (high := self.source.actual_high(u))
        }
        return replace(batch, user_metadata=user_metadata(self.job, self.name, batch.number, marks))

    def _staging_failed(
        self, run: _Run, read: list[_Group], outcomes: list[DatasetOutcome], exc: Exception
    ) -> RecordsResult:
        if run.stop.is_set():  # its Spark jobs were cancelled
            return self.cancelled(run.plan.units, run.started, run.stop.reason)
        message = first_line(exc)
        log.error("dag %s: staging failed: %s", self.name, message, exc_info=log.isEnabledFor(logging.DEBUG))
        for g in read:
            outcomes += [
                self._outcome(u, g, Status.FAILED, g.error or g.refused.get(u.dataset) or message)
                for u in g.group.units
            ]
        return self._result(outcomes, {}, run.started, message=message, read=read)

    def _stage(
        self,
        spark: SparkSession,
        run: _Run,
        ok: list[_Group],
        batch: BatchRef,
        first: tuple[str, Staged] | None = None,
        refused: dict[str, str] | None = None,
    ) -> tuple[list[Staged], dict[str, int]]:
        """Stage every sink's branch (and the error table's) of the union of the ``ok`` groups,
        less the ``refused`` datasets' records; ``first``, a sink staged while reading, is kept if
        its branch holds records or it stages anyway, else discarded. Each staged sink's columns
        are noted in ``run.schemas``."""
        fs, plan = HadoopFs(spark), run.plan
        frame = union_groups([(g.group, g.frame) for g in ok if g.frame is not None])
        if refused:
            frame = frame.where(~F.col(DATASET).isin(list(refused)))
        published = _published(ok, refused)
        by_branch: dict[str, int] = {}
        for counts in published:
            for branch, n in counts.by_branch.items():
                by_branch[branch] = by_branch.get(branch, 0) + n
        written: dict[str, int] = {}
        staged: list[Staged] = []
        try:
            self._stage_each(run, frame, batch, fs, by_branch, first, staged, written)
            if self.spec.error_table and by_branch.get("error", 0):
                errors = self.fork.error_table_rows(frame, plan.predicates["error"], self.ctx)
                # the range is the counting pass's: only a persisted frame is sure to reject the same records again
                cached = all(g.cached is not None for g in ok)
                origins = (
                    merged_origins(c.origins for c in published if c.by_branch.get("error", 0)) if cached else None
                )
                scope = held_scope(self.ctx.job, self.ctx.dag, origins)
                staged.append(ErrorTable(self.spec.error_table).stage(errors, batch, fs, scope))
            if self.spec.replay_marks and by_branch.get("error", 0) < sum(c.read for c in published):
                staged.append(self._replayed(spark, run, ok, frame, batch, fs))
        except Exception:  # what was staged before, given up (the caller discards the sinks' staging)
            for done in staged:
                _discard(None, batch, fs, done)
            if first is not None and all(done is not first[1] for done in staged):
                _discard(None, batch, fs, first[1])
            raise
        return staged, written

    def _stage_each(
        self,
        run: _Run,
        frame: DataFrame,
        batch: BatchRef,
        fs: HadoopFs,
        by_branch: dict[str, int],
        first: tuple[str, Staged] | None,
        staged: list[Staged],
        written: dict[str, int],
    ) -> None:
        """Stage each sink's branch of ``frame`` into ``staged`` (``first``: kept if wanted), its
        count into ``written``."""
        for sink in self.sinks:
            branch = sink.conf.from_
            wanted = bool(by_branch.get(branch, 0) or sink.conf.stages_empty)
            done: Staged | None = None
            if first is not None and first[0] == sink.name:
                if wanted:
                    done = first[1]
                else:
                    _discard(sink, batch, fs, first[1])
            elif wanted:
                log.info("dag %s: staging sink %s", self.name, sink.name)
                rows = self.fork.branch(frame, branch, run.plan.predicates[branch], self.ctx)
                done = sink.stage(rows, batch, fs)
                run.schemas[sink.name] = columns_of(rows.schema)  # analysed once, by the write
            if done is not None:
                staged.append(done)
            kept = done.rows if done is not None else None
            written[sink.name] = by_branch.get(branch, 0) if kept is None else kept

    def _replayed(
        self, spark: SparkSession, run: _Run, ok: list[_Group], frame: DataFrame, batch: BatchRef, fs: HadoopFs
    ) -> Staged:
        """A replay's marks: the record ids its groups read, less those the chain rejected again
        (whose ids the fork keeps in :data:`FILE`), staged in the replay's commit sequence."""
        assert self.spec.replay_marks is not None and isinstance(self.source, ErrorRowsSource)
        read = self.source.record_ids(spark, [u for g in ok for u in g.group.units])
        again = frame.where(run.plan.predicates["error"]).select(F.col(FILE).alias(RECORD_ID))
        ids = read.join(again, on=RECORD_ID, how="left_anti")
        log.info("dag %s: staging the replayed records' marks", self.name)
        return ReplayedTable(self.spec.replay_marks).stage(ids, batch, fs, run_id=self.run_id)

    def cancelled(self, units: list[WorkUnit], started: float, reason: str) -> RecordsResult:
        """The result of a run stopped before publishing: nothing staged, every dataset cancelled."""
        why = f"cancelled: {reason}; nothing was published, the next run reads it again"
        outcomes = [DatasetOutcome(u, Status.CANCELLED, why) for u in units]
        result = self._result(outcomes, {}, started, message=why)
        result.status = Status.CANCELLED
        return result

    def unpublished(self, result: RecordsResult, message: str) -> RecordsResult:
        """``result`` after its publishing failed: what was to commit did not."""
        outcomes = [
            replace(o, status=Status.FAILED, message=message) if o.status == Status.COMMITTED else o
            for o in result.datasets
        ]
        out = self._result(outcomes, {}, time.monotonic() - result.seconds, message=message)
        out.flagged, out.verdicts = result.flagged, result.verdicts  # what was read stays as it was
        return out

    @staticmethod
    def _outcome(unit: WorkUnit, g: _Group, status: Status, message: str) -> DatasetOutcome:
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

    def _result(
        self,
        outcomes: list[DatasetOutcome],
        written: dict[str, int],
        started: float,
        *,
        message: str = "",
        read: Sequence[_Group] = (),
    ) -> RecordsResult:
        """The DAG's result over ``outcomes``; with the groups ``read``, what its rules flagged and
        how its quality tests came out too."""
        committed = [o for o in outcomes if o.status == Status.COMMITTED]
        return RecordsResult(  # read: published or not (a refused batch read its records too); rejected: kept
            name=self.name,
            status=dag_outcome((o.status for o in outcomes), published=bool(committed)),
            message=message,
            records_read=sum(o.records for o in outcomes),
            records_rejected=sum(o.rejected for o in committed),
            records_dropped=sum(o.dropped for o in committed),
            sinks=written,
            seconds=time.monotonic() - started,
            datasets=sorted(outcomes, key=lambda o: o.unit.dataset),
            flagged=_flagged(read),
            verdicts=self._verdicts(read),
        )

    def _verdicts(self, read: Sequence[_Group]) -> list[Verdict]:
        """Each quality test's outcome over every dataset read: failed if it failed on one."""
        out: dict[str, Verdict] = {}
        for g in read:
            for c in g.counts.values():
                rejected = c.by_branch.get("error", 0)
                for v in self.fork.quality.verdicts(read=c.read, rejected=rejected, flagged=c.flagged, gates=c.gates):
                    if v.test not in out or (out[v.test].passed and not v.passed):
                        out[v.test] = v
        return list(out.values())

    def _needs_inference(self) -> bool:
        return self.source.conf.infers_schema

    def _parse_only(self, spark: SparkSession) -> None:
        """What can be checked without the records' schema: the SQL parses, and each step's own
        :meth:`~engine.converters.base.Converter.check` (regexes, datetime patterns)."""
        for converter in self.steps:
            for sql in converter.conf.sql_expressions():
                check_parses(spark, sql, key=converter.key)
            converter.check(spark)
        for name, sql in self.spec.branches.items():
            check_parses(spark, sql, key=f"{self.spec.key}.forks.{name}")
        for gate in self.fork.quality.gates:
            check_parses(spark, gate.sql, key=gate.key)


def scratch_of(warehouse: str, job: str, dag: str) -> str:
    """The DAG's scratch folder (:attr:`Source.scratch <engine.sources.base.Source.scratch>`),
    in the warehouse's metadata."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{job}.{dag}")[:80]
    digest = hashlib.sha1(json.dumps([job, dag]).encode()).hexdigest()[:12]  # job a.b, DAG c is not job a, DAG b.c
    return f"{warehouse.rstrip('/')}/{METADATA_DIR}/scratch/{readable}-{digest}"


def with_dataset(frame: DataFrame, group: MultiWorkUnit) -> DataFrame:
    """``frame`` with each record's dataset URN: a one-dataset group's frame gets it as a constant
    (added over the persisted frame, so it costs nothing to keep)."""
    if DATASET in frame.columns:
        return frame
    return frame.withColumn(DATASET, F.lit(group.units[0].dataset))


def union_groups(frames: list[tuple[MultiWorkUnit, DataFrame]]) -> DataFrame:
    """One frame of several groups' records. Every group's frame must carry the dataset column for
    the union to line up, whether it holds one dataset or several."""
    return reduce(lambda a, b: a.unionByName(b), [with_dataset(f, g) for g, f in frames])


def _discard(sink: Sink | None, batch: BatchRef, fs: HadoopFs, staged: Staged | None = None) -> None:
    """What ``sink`` staged of ``batch`` thrown away (its staging, and, given what it ``staged``,
    the files Delta's writer put in its table's directory, which no sequence will commit); if that
    fails, it stays where no reader of the table looks (the batch's staging, which the next run of
    the batch writes again, or files no Delta commit names)."""
    try:
        if sink is not None:
            sink.discard(batch, fs)
        for step in staged.steps if staged is not None else []:
            if isinstance(step, DeltaWrite):
                step.unstage(fs)
    except Exception as exc:
        log.warning(
            "sink %s: what it staged of batch %d stays in its staging: %s",
            sink.name if sink is not None else "?",
            batch.number,
            first_line(exc),
        )


def columns_of(schema: StructType) -> list[tuple[str, str]]:
    """A schema's top-level columns and their Spark SQL types."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _published(ok: list[_Group], refused: dict[str, str] | None) -> list[BranchCounts]:
    """The counts of the datasets of the ``ok`` groups that are not ``refused``."""
    return [c for g in ok for d, c in g.counts.items() if d not in (refused or {})]


def _flagged(read: Sequence[_Group]) -> dict[str, int]:
    """The records each counted rule flagged, over every group read."""
    out: dict[str, int] = {}
    for g in read:
        for counts in g.counts.values():
            for step, n in counts.flagged.items():
                out[step] = out.get(step, 0) + n
    return out


def _share_costs(group: MultiWorkUnit, read: _Group, seconds: float) -> None:
    """Each unit's records and its share of the group's executor seconds (by records, else evenly)."""
    total = sum(c.read for c in read.counts.values()) or 0
    for unit in group.units:
        unit.records = read.counts[unit.dataset].read if unit.dataset in read.counts else 0
        share = unit.records / total if total else 1 / len(group.units)
        unit.executor_seconds = seconds * share
