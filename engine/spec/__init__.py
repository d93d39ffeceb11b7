"""Config -> frozen, validated job spec. Never imports pyspark: compiling needs no JVM."""

from engine.spec.compile import compile_job, renamed
from engine.spec.model import DagSpec, JobSpec, PluginSpec, SourceSpec

__all__ = ["DagSpec", "JobSpec", "PluginSpec", "SourceSpec", "compile_job", "renamed"]
