"""The application config around a job (``conf/config.yaml``): what the command line may set beside
the job itself, validated like the job (unknown keys refused, errors naming the key path) before
Spark starts. No pyspark here.

Hydra types the values it parses (``checkpoint.value=1700000000000`` is a number), so the keys
that carry free text (watermarks, reasons, URNs) take any scalar and keep it as text.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from engine.spec.validation import validate
from engine.state.backends import BACKENDS as METADATA_BACKENDS

__all__ = ["MODES", "PROGRESS_VIEWS", "AppConf", "CheckpointConf", "CommitConf", "LeaseConf", "app_conf"]

MODES = ("run", "validate", "status", "checkpoint", "commit")
"""What a run does (``mode=``): see :class:`AppConf`."""
PROGRESS_VIEWS = ("auto", "live", "log", "off")
"""How the console shows a running job (``progress=``)."""
MIN_LEASE_SECONDS = 5.0
"""A shorter lease could expire between two renewals of a healthy run."""


def _text(value: Any) -> Any:
    """A value as the text it was written as (``None`` stays unset): Hydra reads
    ``checkpoint.value=[1,2,3]`` as a list, which a multi-long watermark parses from its text."""
    return value if value is None else str(value)


Text = Annotated[str, BeforeValidator(_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StatusConf(_Strict):
    """``mode=status``: the last runs and every dataset's watermark."""

    runs: int = Field(default=5, ge=1)
    """How many of the job's last runs to show."""


class CheckpointConf(_Strict):
    """``mode=checkpoint``: show or change one dataset's watermark (checked against the job's state
    when applied, see :mod:`engine.state.checkpoints`)."""

    action: Text = "show"
    """``show``, ``set``, ``reset``, ``rewind`` or ``start_over``."""
    dataset: Text | None = None
    """The dataset URN (as ``mode=status`` lists it)."""
    value: Text | None = None
    """The new watermark (``set``, ``rewind``), as the CLI writes it."""
    kind: Text | None = None
    """The watermark's kind when the dataset has none yet: ``long``, ``timestamp``, ``multi_long`` or ``file``."""
    reason: Text | None = None
    """Why (required to change anything: every change is recorded with it)."""
    dag: Text | None = None
    """The DAG, when the job has several."""


class CommitConf(_Strict):
    """``mode=commit``: show, release or abandon a batch that could not be published."""

    action: Text = "show"
    """``show``, ``release`` or ``abandon``."""
    dag: Text | None = None
    """The DAG, when batches of several wait."""
    batch: int | None = Field(default=None, ge=0)
    """The batch number (as ``mode=commit`` lists it), when several wait."""
    reason: Text | None = None
    """Why (required for ``release`` and ``abandon``)."""


class LeaseConf(_Strict):
    """One run of a job at a time (:class:`engine.commit.lease.Lease`)."""

    ttl_seconds: float = 600.0
    """How long the lease of a run that died without releasing it blocks the job (a dead run on
    the same host: not at all, its pid is checked)."""

    @field_validator("ttl_seconds", mode="before")
    @classmethod
    def _seconds(cls, raw: Any) -> float:
        try:
            ttl = float(raw)
        except (TypeError, ValueError):
            raise PydanticCustomError("seconds", "`{raw}` is not a number of seconds", {"raw": raw}) from None
        if ttl < MIN_LEASE_SECONDS:
            raise PydanticCustomError(
                "lease_too_short", "a lease of {ttl}s is too short to renew; use 5 or more", {"ttl": f"{ttl:g}"}
            )
        return ttl


class MetadataConf(_Strict):
    """The engine's metadata tables (``<warehouse>/_engine``) and the error tables."""

    backend: Text = "auto"
    """How they are reached: ``auto`` (delta-rs on a local warehouse, Spark elsewhere), ``spark``
    (always Spark: a Spark job per read or write) or ``delta_rs`` (a local warehouse only, so far)."""

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        return _one_of(backend, METADATA_BACKENDS, "unknown_backend", "unknown metadata backend")


class SparkConf(_Strict):
    """The ``spark`` config group (``conf/spark/<name>.yaml``): the application's SparkSession."""

    app_name: Text = "engine"
    """The Spark application's name."""
    conf: dict[str, Any] = {}
    """Spark settings of the session (``spark.conf.<key>=<value>``); the master, driver memory and
    jars are spark-submit options."""


class AppConf(_Strict):
    """The composed config of one run: the job and what the command line says to do with it.

    .. code-block:: yaml

        warehouse: /data/lake
        mode: run
        lease:
          ttl_seconds: 600
    """

    warehouse: Text
    """Where relative sink paths, the error tables and the engine's metadata (``_engine/``) live."""
    mode: Text = "run"
    """``run`` the job, ``validate`` it (compile and check, no Spark job), show its ``status``,
    show or change a ``checkpoint``, or show, release or abandon a ``commit``."""
    debug: bool = False
    """Show tracebacks with errors."""
    progress: Text = "auto"
    """The console while a job runs: ``auto`` (live on a terminal, log lines otherwise), ``live``,
    ``log`` or ``off`` (which drops the end-of-run table too)."""
    status: StatusConf = StatusConf()
    """``mode=status``."""
    checkpoint: CheckpointConf = CheckpointConf()
    """``mode=checkpoint``."""
    commit: CommitConf = CommitConf()
    """``mode=commit``."""
    lease: LeaseConf = LeaseConf()
    """The job's run lease."""
    metadata: MetadataConf = MetadataConf()
    """How the metadata and error tables are reached."""
    spark: SparkConf = SparkConf()
    """The SparkSession's settings."""
    job: dict[str, Any]
    """The job itself, compiled on its own (:func:`engine.spec.compile_job`)."""

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        return _one_of(mode, MODES, "unknown_mode", "unknown mode")

    @field_validator("progress")
    @classmethod
    def _known_view(cls, view: str) -> str:
        return _one_of(view, PROGRESS_VIEWS, "unknown_progress", "unknown progress view")


def _one_of(value: str, known: tuple[str, ...], kind: str, what: str) -> str:
    if value not in known:
        raise PydanticCustomError(
            kind, "{what} `{value}`; use one of: {known}", {"what": what, "value": value, "known": ", ".join(known)}
        )
    return value


def app_conf(data: dict[str, Any], *, file: str | None = None) -> AppConf:
    """``data`` (a composed config) validated; a mistake is one ``ConfigError`` naming its key path."""
    return validate(AppConf, data, key="", file=file)
