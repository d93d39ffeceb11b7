"""The frozen, validated form of a job: what the runtime executes. No pyspark here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.plugins import PluginConf, PluginEntry

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


@dataclass(frozen=True)
class JobSpec:
    name: str
    file: str | None
    warehouse: str
    parallelism: int
    dags: tuple[DagSpec, ...]
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
