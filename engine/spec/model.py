"""The frozen, validated form of a job: what the runtime executes. No pyspark here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, model_validator

from engine.converters.conf import ConverterConf
from engine.plugins import PluginConf, PluginEntry
from engine.plugins.lineage import DatasetName
from engine.plugins.threshold import Threshold, ThresholdValue
from engine.sources.conf import LimitsConf, SourceConf
from engine.spec.copy import CopyConf, CopyDagSpec

PersistLevel = Literal["DISK_ONLY", "MEMORY_AND_DISK", "MEMORY_ONLY", "NONE"]
BUILTIN_BRANCHES = ("valid", "error")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ErrorTableConf(_Strict):
    """Where rejected records go: a Delta table with the original record and the reasons."""

    enabled: bool = True
    """Write rejected records to the error table."""
    path: str | None = None
    """The error table's location; ``<warehouse>/_errors/<job>`` when unset."""


class PublishConf(_Strict):
    """When a run's datasets are published and their watermarks advanced."""

    policy: Literal["full", "partial"] = "full"
    """``full``: any failed dataset rolls the whole DAG run back (nothing written, no watermark
    moves). ``partial``: the datasets that read fine are written and advance; failed ones keep
    their watermark for the next run (exit code 1, status PARTIAL)."""
    max_attempts: int = Field(default=3, ge=1)
    """How many times a batch's commit sequence is tried (the first run and the recoveries after
    it) before the DAG is quarantined."""


class WorkUnitsConf(_Strict):
    """How a run's work units are packed and run."""

    max_groups: int = Field(default=8, ge=1)
    """At most this many multi-work-units (each one Spark job and one unit of failure)."""
    parallelism: int = Field(default=2, ge=1)
    """How many multi-work-units of one DAG are read at once."""


class DagConf(_Strict):
    """What one DAG's config may hold. Validating it gives one of a tagged union: the ``copy`` key
    makes a :class:`CopyDagConf`, its absence (or ``null``) a :class:`RecordsDagConf`. Both accept
    every key, so that a mistake (a copy DAG with ``sources``) is named by compiling, not reported
    as an unknown key; unknown keys are errors either way."""

    priority: int = 0
    """Higher starts first when more DAGs are ready than ``parallelism`` allows (ties: the one
    that cost most in its last run first)."""
    after: list[str] = Field(default_factory=list)
    """DAGs of the same job this one runs after; if one of them does not succeed, this one is
    skipped (and says why)."""
    pool: str | None = None
    """The Spark FAIR scheduler pool its Spark jobs run in; its own pool (named after it) when unset."""

    sources: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The DAG's source, by name (one per DAG)."""
    converters: list[dict[str, Any]] = Field(default_factory=list)
    """The converter chain, applied in order."""
    forks: dict[str, str] = Field(default_factory=dict)
    """Named branches: a boolean Spark SQL expression over valid records (overlap allowed)."""
    sinks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Sinks by name, each reading ``from`` a branch."""
    copy_: CopyConf | None = Field(default=None, alias="copy")
    """A copy DAG instead (files replicated between file systems): no sources, converters, forks or sinks."""
    errors: ErrorTableConf = ErrorTableConf()
    """The error table."""
    gates: list[str] = Field(default_factory=list)
    """Quality gates: boolean aggregate Spark SQL expressions over each dataset's valid records
    (``count(*) > 0``, ``max(event_time) > current_timestamp() - interval 1 day``), evaluated in
    the counting pass; a batch failing one is not published and keeps its watermark."""
    max_rejected: ThresholdValue | None = None
    """The error budget: the most records of a dataset's batch the chain may reject, a count
    (``100``) or a share of the records read (``"2%"``); one more fails the batch like a gate."""
    persist: PersistLevel = "DISK_ONLY"
    """How the converted records are kept between the branches' writes (the source is read once)."""
    publish: PublishConf = PublishConf()
    """The commit policy (a job-level ``publish`` is the default of its DAGs)."""
    work_units: WorkUnitsConf = WorkUnitsConf()
    """Packing of work units (a job-level ``work_units`` is the default of its DAGs)."""

    @model_validator(mode="wrap")
    @classmethod
    def _by_kind(cls, data: Any, handler: ModelWrapValidatorHandler[DagConf]) -> DagConf:
        """``DagConf`` itself validates as the kind its ``copy`` key selects (its subclasses and
        :class:`JobConf` validate as themselves)."""
        if cls is not DagConf or not isinstance(data, dict):
            return handler(data)
        kind = CopyDagConf if data.get("copy") is not None else RecordsDagConf
        return kind.model_validate(data)


class RecordsDagConf(DagConf):
    """A records DAG: a source, a converter chain, fork branches and sinks."""

    copy_: None = Field(default=None, alias="copy")
    """``null`` (or left out); set, it makes a :class:`CopyDagConf`."""


class CopyDagConf(DagConf):
    """A copy DAG: files replicated between file systems (:class:`~engine.spec.copy.CopyConf`).
    A records DAG's keys are accepted only to be refused when set (``sources``, ``converters``,
    ``forks``, ``sinks``: compiling names the mistake) or ignored (``errors``, ``persist``,
    ``work_units``, which a job-level default may bring)."""

    copy_: CopyConf = Field(alias="copy")
    """What is copied, from where to where."""


AnyDagConf = RecordsDagConf | CopyDagConf
"""A validated DAG config: what ``DagConf.model_validate`` returns."""


class PoolConf(_Strict):
    """A Spark FAIR scheduler pool (``spark.scheduler.mode=FAIR``)."""

    weight: int = Field(default=1, ge=1)
    """The pool's share of the cluster relative to other pools."""
    min_share: int = Field(default=0, ge=0)
    """Cores the pool gets before fair sharing applies."""


class GlobDiscoverConf(_Strict):
    """Each file or directory matching ``path`` is a dataset (``{dataset}``: its name without the
    extension; ``{path}``: its full URI)."""

    type: Literal["glob"]
    path: str
    """A glob pattern on any Hadoop file system; relative to the job file."""
    match: Literal["directories", "files", "any"] = "directories"
    """What counts as a dataset."""


class JdbcTablesDiscoverConf(_Strict):
    """Each table (and view, if asked) of a database schema is a dataset (``{dataset}``: the table
    name; ``{table}``: ``schema.table``; ``{schema}``)."""

    type: Literal["jdbc_tables"]
    url: str
    """The JDBC URL (credentials in ``user``/``password``)."""
    schema_: str = Field(alias="schema")
    """The schema whose tables are listed."""
    user: str | None = None
    password: str | None = None
    driver: str | None = None
    views: bool = False
    """List views too."""


class FanOutConf(_Strict):
    """One DAG template fanned out over datasets: a JobDag per dataset, each with its own state,
    metrics and status. ``{dataset}`` (and the discovery's other placeholders) in any string of the
    template is replaced by the dataset's value.

    .. code-block:: hocon

        fan_out {
          discover { type = glob, path = "landing/*" }
          template {
            sources.in { type = files, format = json, path = "{path}/*.json" }
            sinks.lake { type = delta, path = "lake/{dataset}" }
          }
        }
    """

    datasets: list[str] = Field(default_factory=list)
    """The datasets, listed; or give ``discover``."""
    discover: GlobDiscoverConf | JdbcTablesDiscoverConf | None = Field(default=None, discriminator="type")
    """Find the datasets when the job runs."""
    include: str | None = None
    """Keep only datasets whose name matches this regular expression."""
    exclude: str | None = None
    """Drop datasets whose name matches this regular expression."""
    name: str = "{dataset}"
    """Each DAG's name (placeholders allowed)."""
    template: dict[str, Any]
    """A DAG's config, as under ``dags.<name>``."""
    allow_empty: bool = False
    """Whether finding no dataset is fine (otherwise it is an error naming the discovery)."""


class JobConf(DagConf):
    """A job file: either one DAG's keys at the top, or several DAGs under ``dags``."""

    name: str | None = None
    """The job's name (table paths, run history); the job file's name when unset."""
    description: str = ""
    """Free text shown by ``--cfg job``."""
    parallelism: int = Field(default=2, ge=1)
    """How many JobDags run at once in the Spark application."""
    dags: dict[str, DagConf] = Field(default_factory=dict)
    """Several JobDags in one job, by name."""
    pools: dict[str, PoolConf] = Field(default_factory=dict)
    """FAIR scheduler pools by name (a DAG's ``pool``); pools not listed get weight 1."""
    fan_out: FanOutConf | None = None
    """A DAG per dataset from one template (in addition to any ``dags``)."""
    limits: LimitsConf = LimitsConf()
    """Throttling for the whole job run, shared by its DAGs in order (each source's own
    ``limits`` still apply)."""


@dataclass(frozen=True)
class PluginSpec:
    """A validated plugin config with its registry entry and its key path."""

    name: str
    conf: PluginConf
    entry: PluginEntry[Any, Any]
    key: str


@dataclass(frozen=True)
class SourceSpec(PluginSpec):
    schema_ddl: str | None = None
    """The source's schema as Spark DDL (Avro schemas already converted), or ``None`` to infer."""


@dataclass(frozen=True)
class DagSpec:
    """A compiled records DAG: one source, a converter chain, fork branches and sinks."""

    kind: ClassVar[str] = "records"
    """Which DAG runs it (``engine.runtime.dag.DAG_CLASSES``)."""

    name: str
    key: str
    source: SourceSpec
    steps: tuple[PluginSpec, ...]
    branches: dict[str, str]
    sinks: tuple[PluginSpec, ...]
    error_table: str | None
    persist: PersistLevel
    publish: PublishConf = field(default_factory=PublishConf)
    gates: tuple[str, ...] = ()
    max_rejected: Threshold | None = None
    work_units: WorkUnitsConf = field(default_factory=WorkUnitsConf)
    priority: int = 0
    after: tuple[str, ...] = ()
    pool: str | None = None
    dataset: str | None = None
    """The fan-out dataset this DAG was made for."""
    replay_marks: str | None = None
    """``mode=replay``: the table its source's error rows are marked replayed in, once published
    (:mod:`engine.cli.error_replay`)."""
    unwritten: tuple[PluginSpec, ...] = ()
    """Sinks it no longer writes that an unfinished batch of it may still publish to (a replay
    leaves out the ``from = error`` sinks, but finishes a live batch that wrote them): their logins
    still reach the commit steps (:meth:`RecordsDag.locations <engine.runtime.records.RecordsDag.locations>`)."""
    warehouse: str = ""
    """The job's warehouse: where the DAG keeps what it reads besides its sinks' staging (the new
    bytes of files appended to, :func:`engine.runtime.records.scratch_of`)."""

    @property
    def pool_name(self) -> str:
        return self.pool or self.name

    def writes(self) -> list[str]:
        """Every place the DAG writes: what its sinks write, and its error table."""
        paths = [path for s in self.sinks for path in s.conf.writes().values()]
        return [*paths, self.error_table] if self.error_table else paths

    def delta_tables(self) -> list[str]:
        """The Delta tables it writes: its Delta sinks' and its error table."""
        paths = [path for s in self.sinks if s.conf.type == "delta" for path in s.conf.writes().values()]
        return [*paths, self.error_table] if self.error_table else paths

    def inputs(self) -> dict[str, str]:
        """What its source and its converters read (a lookup's reference), as each names it -> a
        path to compare with what others write."""
        conf = self.source.conf
        assert isinstance(conf, SourceConf)  # a DAG's source spec holds its source's config
        steps = [path for s in self.steps if isinstance(s.conf, ConverterConf) for path in s.conf.inputs().items()]
        return {**conf.inputs(), **dict(steps)}

    def references(self) -> list[DatasetName]:
        """What its converters read besides the records (a lookup's reference), as lineage names it."""
        return [n for s in self.steps if isinstance(s.conf, ConverterConf) for n in s.conf.lineage()]


AnyDagSpec = DagSpec | CopyDagSpec
"""A compiled DAG of either kind; each has ``kind``, ``name``, ``key``, the scheduling keys
(``publish``, ``priority``, ``after``, ``pool``, ``dataset``, ``error_table``) and says what it
writes and reads (``writes()``, ``delta_tables()``, ``inputs()``)."""


@dataclass(frozen=True)
class JobSpec:
    name: str
    file: str | None
    warehouse: str
    parallelism: int
    dags: tuple[AnyDagSpec, ...]
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    limits: LimitsConf = field(default_factory=LimitsConf)
    pools: dict[str, PoolConf] = field(default_factory=dict)
    discover: GlobDiscoverConf | JdbcTablesDiscoverConf | None = None
    """Set while the fan-out's datasets are still to be found: the DAGs are then those of one
    example dataset (every config check done); compile again with what was found."""
