"""The frozen, validated form of a job: what the runtime executes. No pyspark here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.plugins import PluginConf, PluginEntry
from engine.sources.conf import LimitsConf

PersistLevel = Literal["DISK_ONLY", "MEMORY_AND_DISK", "MEMORY_ONLY", "NONE"]
BUILTIN_BRANCHES = ("valid", "error")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


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
    """One JobDag: a source, a converter chain, fork branches and sinks."""

    sources: dict[str, dict[str, Any]] = Field(min_length=1)
    """The DAG's source, by name (one per DAG)."""
    converters: list[dict[str, Any]] = []
    """The converter chain, applied in order."""
    forks: dict[str, str] = {}
    """Named branches: a boolean Spark SQL expression over valid records (overlap allowed)."""
    sinks: dict[str, dict[str, Any]] = Field(min_length=1)
    """Sinks by name, each reading ``from`` a branch."""
    errors: ErrorTableConf = ErrorTableConf()
    """The error table."""
    persist: PersistLevel = "DISK_ONLY"
    """How the converted records are kept between the branches' writes (the source is read once)."""
    publish: PublishConf = PublishConf()
    """The commit policy (a job-level ``publish`` is the default of its DAGs)."""
    work_units: WorkUnitsConf = WorkUnitsConf()
    """Packing of work units (a job-level ``work_units`` is the default of its DAGs)."""


class JobConf(DagConf):
    """A job file: either one DAG's keys at the top, or several DAGs under ``dags``."""

    sources: dict[str, dict[str, Any]] = {}  # type: ignore[assignment]
    sinks: dict[str, dict[str, Any]] = {}  # type: ignore[assignment]
    name: str | None = None
    """The job's name (table paths, run history); the job file's name when unset."""
    description: str = ""
    """Free text shown by ``--cfg job``."""
    parallelism: int = Field(default=2, ge=1)
    """How many JobDags run at once in the Spark application."""
    dags: dict[str, DagConf] = {}
    """Several JobDags in one job, by name."""
    limits: LimitsConf = LimitsConf()
    """Throttling for the whole job run, shared by its DAGs in order (each source's own
    ``limits`` still apply)."""


@dataclass(frozen=True)
class PluginSpec:
    """A validated plugin config with its registry entry and its key path."""

    name: str
    conf: PluginConf
    entry: PluginEntry
    key: str


@dataclass(frozen=True)
class SourceSpec(PluginSpec):
    schema_ddl: str | None = None
    """The source's schema as Spark DDL (Avro schemas already converted), or ``None`` to infer."""


@dataclass(frozen=True)
class DagSpec:
    name: str
    key: str
    source: SourceSpec
    steps: tuple[PluginSpec, ...]
    branches: dict[str, str]
    sinks: tuple[PluginSpec, ...]
    error_table: str | None
    persist: PersistLevel
    publish: PublishConf = field(default_factory=PublishConf)
    work_units: WorkUnitsConf = field(default_factory=WorkUnitsConf)


@dataclass(frozen=True)
class JobSpec:
    name: str
    file: str | None
    warehouse: str
    parallelism: int
    dags: tuple[DagSpec, ...]
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    limits: LimitsConf = field(default_factory=LimitsConf)
