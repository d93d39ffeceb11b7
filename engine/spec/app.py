"""The application config around a job (``conf/config.yaml``): what the command line may set beside
the job itself, validated like the job (unknown keys refused, errors naming the key path) before
Spark starts. No pyspark here.

Hydra types the values it parses (``checkpoint.value=1700000000000`` is a number), so the keys
that carry free text (watermarks, reasons, URNs) take any scalar and keep it as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from engine.errors import ConfigError
from engine.spec.validation import validate
from engine.state.backends import BACKENDS as METADATA_BACKENDS
from engine.storage.blobs import Blobs, blobs
from engine.storage.options import bucket, connection_hadoop_settings, store_options
from engine.storage.paths import StoragePath

__all__ = ["MODES", "PROGRESS_VIEWS", "AppConf", "CheckpointConf", "CommitConf", "LeaseConf", "ReplayConf", "app_conf"]

MODES = ("run", "validate", "status", "checkpoint", "commit", "plan", "replay")
"""What a run does (``mode=``): see :class:`AppConf`."""
PROGRESS_VIEWS = ("auto", "live", "log", "off")
"""How the console shows a running job (``progress=``)."""
LOG_FORMATS = ("text", "json")
"""How log lines are written (``logs=``)."""
MIN_LEASE_SECONDS = 5.0
"""A shorter lease could expire between two renewals of a healthy run."""


def _text(value: Any) -> Any:
    """A value as the text it was written as (``None`` stays unset): Hydra reads
    ``checkpoint.value=[1,2,3]`` as a list, which a multi-long watermark parses from its text."""
    return value if value is None else str(value)


Text = Annotated[str, BeforeValidator(_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricsConf(_Strict):
    """Where a run's metrics are pushed when it ends (:mod:`engine.cli.runmetrics`).

    .. code-block:: yaml

        metrics:
          pushgateway: http://pushgateway.internal:9091
          textfile: /var/lib/node_exporter/textfile/engine_{job}.prom
    """

    pushgateway: Text | None = None
    """A Prometheus Pushgateway's URL; the run's metrics replace the last run's of the same job."""
    textfile: Text | None = None
    """A ``.prom`` file for node-exporter's textfile collector (``{job}``: the job's name),
    replaced atomically."""
    grouping: dict[str, Text] = Field(default_factory=dict)
    """More labels of the Pushgateway's grouping key than ``job`` (``instance``, ``env``)."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds a push may take; a push that fails is logged, and the run's exit code stays."""

    @property
    def enabled(self) -> bool:
        return bool(self.pushgateway or self.textfile)


class LineageConf(_Strict):
    """Where a run's OpenLineage events go (:mod:`engine.runtime.lineage`): an HTTP endpoint (Marquez,
    DataHub, OpenMetadata, Atlan...) and/or a file of JSON lines.

    .. code-block:: yaml

        lineage:
          url: http://marquez.internal:5000
          file: /var/log/engine/lineage.jsonl
    """

    url: Text | None = None
    """The receiver's base URL; events are POSTed to ``<url>/<endpoint>``."""
    endpoint: Text = "api/v1/lineage"
    """The path under ``url`` (Marquez's by default)."""
    api_key: Text | None = None
    """Sent as ``Authorization: Bearer <api_key>`` (an ``ENC(...)`` value is decrypted)."""
    file: Text | None = None
    """A file each event is appended to, one JSON object per line."""
    namespace: Text = "engine"
    """The namespace of the jobs the events name (``<job>.<dag>``, a flow's job)."""
    timeout: float = Field(default=5.0, gt=0)
    """Seconds a POST may take; an event that cannot be sent is logged, and the run goes on."""

    @property
    def enabled(self) -> bool:
        return bool(self.url or self.file)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            raise ValueError(f"`{url}` is not an http:// or https:// URL with a host")
        return url


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


class ReplayConf(_Strict):
    """``mode=replay``: run error-table rows again through the job's current converters, forks and
    sinks (:mod:`engine.cli.error_replay`)."""

    dag: Text | None = None
    """Only this DAG's rows (default: every records DAG with an error table)."""
    run: Text | None = None
    """Only rows rejected by this run id (as ``mode=status`` and the summary show it)."""
    step: Text | None = None
    """Only rows whose first failing step is this one (``read`` for records that did not parse)."""
    reason: Text | None = None
    """Only rows with a reason holding this text."""
    dry_run: bool = False
    """Count the rows a replay would read, by DAG and step; read nothing else, write nothing."""


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


class S3ConnectionConf(_Strict):
    """An ``s3`` connection (``conf/connections/<name>.yaml``, :mod:`engine.config.connections`):
    the buckets it serves and how to reach them. Unset keys fall back to the AWS defaults (the
    ``AWS_*`` variables, ``~/.aws``, the instance's role)."""

    buckets: list[Text] = Field(min_length=1)
    """The buckets this connection serves, wherever a path names them."""
    endpoint: Text | None = None
    """An S3-compatible server's URL (``https://minio:9000``); unset: AWS."""
    region: Text | None = None
    access_key: Text | None = None
    secret_key: Text | None = None
    """Write it ``ENC(...)`` (README "Encrypted secrets")."""
    session_token: Text | None = None
    path_style: bool | None = None
    """Address buckets as ``endpoint/bucket``; default: yes when an endpoint is given."""

    @field_validator("endpoint")
    @classmethod
    def _url(cls, endpoint: str | None) -> str | None:
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise PydanticCustomError(
                "endpoint", "an endpoint is an http:// or https:// URL, not `{e}`", {"e": endpoint}
            )
        return endpoint


class StorageConf(_Strict):
    """Object stores: ``storage.connections`` names the ``s3`` connections a run uses (a list on
    the command line, ``storage.connections=[lake_s3]``; each one's keys once loaded)."""

    connections: dict[str, S3ConnectionConf] = Field(default_factory=dict)

    @field_validator("connections", mode="before")
    @classmethod
    def _none_named(cls, raw: Any) -> Any:
        return {} if raw == [] else raw  # the shipped default: no connection

    @field_validator("connections")
    @classmethod
    def _one_per_bucket(cls, connections: dict[str, S3ConnectionConf]) -> dict[str, S3ConnectionConf]:
        served: dict[str, str] = {}
        for name, conn in connections.items():
            for name_of_bucket in conn.buckets:
                if name_of_bucket in served:
                    raise PydanticCustomError(
                        "bucket_twice",
                        "bucket `{b}` is served by connections `{a}` and `{n}`: name one",
                        {"b": name_of_bucket, "a": served[name_of_bucket], "n": name},
                    )
                served[name_of_bucket] = name
        return connections

    def serving(self, path: str) -> tuple[str, S3ConnectionConf] | None:
        """The connection (name, keys) of ``path``'s bucket, if one serves it."""
        if not path.startswith(("s3://", "s3a://", "s3n://")):
            return None
        wanted = bucket(path)
        return next(((n, c) for n, c in self.connections.items() if wanted in c.buckets), None)

    def hadoop_settings(self) -> dict[str, str]:
        """S3A's per-bucket settings of every connection."""
        return {k: v for c in self.connections.values() for k, v in connection_hadoop_settings(c.model_dump()).items()}

    def options(self, url: str) -> dict[str, Any]:
        """The options of the connection serving ``url``'s bucket, as ``engine.copy.fs.resolve``
        takes them (``{}`` when none serves it: the environment's credentials apply)."""
        found = self.serving(url)
        if found is None:
            return {}
        keys = found[1].model_dump(exclude={"buckets"})
        return {k: v for k, v in keys.items() if v is not None}

    def store_options(self, path: str) -> dict[str, str]:
        """delta-rs's and obstore's options for ``path``: the connection serving its bucket's,
        else the environment's."""
        found = self.serving(path)
        return store_options(path, connection=found[1].model_dump() if found is not None else None)

    def blobs(self, location: str) -> Blobs:
        """:func:`engine.storage.blobs.blobs` of ``location`` with the connection serving it."""
        found = self.serving(location)
        if found is None:
            return blobs(location)
        name, conn = found
        via = f"connection `{name}`"
        return blobs(location, store_options(location, connection=conn.model_dump()), via=via)


class SparkConf(_Strict):
    """The ``spark`` config group (``conf/spark/<name>.yaml``): the application's SparkSession."""

    app_name: Text = "engine"
    """The Spark application's name."""
    conf: dict[str, Any] = Field(default_factory=dict)
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
    show or change a ``checkpoint``, show, release or abandon a ``commit``, ``plan``: print
    what it compiles to (a flow: each hop's template, executor and job) and run nothing, or
    ``replay`` rows of its error table through its current converters."""
    debug: bool = False
    """Show tracebacks with errors."""
    progress: Text = "auto"
    """The console while a job runs: ``auto`` (live on a terminal, log lines otherwise), ``live``,
    ``log`` or ``off`` (which drops the end-of-run table too)."""
    logs: Text = "text"
    """``text``: log lines on stderr; ``json``: one JSON object per log record on stdout, before
    the summary, and no end-of-run table, so that stdout is JSON lines only."""
    metrics: MetricsConf = MetricsConf()
    """Where the run's metrics are pushed (Prometheus' Pushgateway, a node-exporter textfile)."""
    lineage: LineageConf = LineageConf()
    """Where the run's OpenLineage events go (an HTTP receiver, a file)."""
    status: StatusConf = StatusConf()
    """``mode=status``."""
    checkpoint: CheckpointConf = CheckpointConf()
    """``mode=checkpoint``."""
    commit: CommitConf = CommitConf()
    """``mode=commit``."""
    replay: ReplayConf = ReplayConf()
    """``mode=replay``."""
    lease: LeaseConf = LeaseConf()
    """The job's run lease."""
    metadata: MetadataConf = MetadataConf()
    """How the metadata and error tables are reached."""
    storage: StorageConf = StorageConf()
    """Object-store connections."""
    spark: SparkConf = SparkConf()
    """The SparkSession's settings."""
    job: dict[str, Any] | None = None
    """The job itself, compiled on its own (:func:`engine.spec.compile_job`)."""
    flow: dict[str, Any] | None = None
    """A flow (``flow=<group>/<name>``) instead of a job, compiled by :mod:`engine.flow`."""
    topology_dir: Text | None = None
    """Flows: the directory of the flow graph (data nodes, flow edges, executors); None:
    ``conf/topology/``."""
    hop: Text | None = None
    """Flows: run only this hop (what a flow submits for a hop on another executor)."""

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        return _one_of(mode, MODES, "unknown_mode", "unknown mode")

    @field_validator("progress")
    @classmethod
    def _known_view(cls, view: str) -> str:
        return _one_of(view, PROGRESS_VIEWS, "unknown_progress", "unknown progress view")

    @field_validator("logs")
    @classmethod
    def _known_format(cls, logs: str) -> str:
        return _one_of(logs, LOG_FORMATS, "unknown_logs", "unknown log format")


def _one_of(value: str, known: tuple[str, ...], kind: str, what: str) -> str:
    if value not in known:
        raise PydanticCustomError(
            kind, "{what} `{value}`; use one of: {known}", {"what": what, "value": value, "known": ", ".join(known)}
        )
    return value


def app_conf(data: dict[str, Any], *, file: str | None = None) -> AppConf:
    """``data`` (a composed config) validated; a mistake is one ``ConfigError`` naming its key path."""
    conf = validate(AppConf, data, key="", file=file)
    if (conf.job is None) == (conf.flow is None):
        given = "both" if conf.job is not None else "neither"
        raise ConfigError(
            f"give one of `job=<path under jobs/>` and `flow=<group>/<name>` (jobs/flows/<group>/<name>.conf), "
            f"not {given}",
            key="job",
        )
    if conf.job is not None:
        flows_only = [k for k in ("hop", "topology_dir") if getattr(conf, k) is not None]
        if flows_only:
            raise ConfigError(
                f"`{flows_only[0]}` is for a flow (flow=<group>/<name>); a job (job=...) has none, so it would "
                "do nothing",
                key=flows_only[0],
            )
    check_warehouse(conf.warehouse)
    return conf


def check_warehouse(warehouse: str) -> None:
    """A local warehouse is a folder, or a place where one can be made: a path that names a file,
    or lies under one, is a config error naming ``warehouse`` (before anything is written, where
    the file system would only say ``Not a directory`` about some file under it)."""
    place = StoragePath.parse(warehouse)
    if not place.is_local:
        return
    path = Path(place.path)
    for at in (path, *path.parents):
        if at.is_dir():
            return
        if at.exists():
            where = "is a file" if at == path else f"lies under {at}, which is a file"
            raise ConfigError(
                f"the warehouse {warehouse} {where}, not a folder: it holds the tables the job writes and the "
                "engine's metadata (_engine/); name a folder (it is made if missing)",
                key="warehouse",
            )
