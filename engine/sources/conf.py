"""Config of the built-in sources (no pyspark here: compiling a job needs no JVM).

:class:`SourceConf` carries the hooks the compiler and the planner ask of every source: its
declared schema (:meth:`SourceConf.schema_ddl`), whether planning must infer one
(:attr:`SourceConf.infers_schema`), and the input paths an upstream DAG may write
(:meth:`SourceConf.inputs`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.plugins.conf import Anchors, PluginConf, option_texts
from engine.plugins.conf import parse_seconds as parse_seconds
from engine.plugins.lineage import DatasetName, of_jdbc, of_kafka, of_path
from engine.plugins.sizes import parse_bytes as parse_bytes
from engine.sources.avro_schema import avro_to_ddl, load_avro_schema
from engine.sources.stable_hash import seed0_str_hash
from engine.sources.workunits import Budget
from engine.state.watermarks import parse_timestamp

_GLOB = re.compile(r"[*?\[{]")


class LimitsConf(BaseModel):
    """Throttling: how much one run reads (``None``: no limit). Sizes take ``k/m/g/t`` suffixes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_records: int | None = Field(default=None, ge=1)
    """At most this many records (sources that can estimate records: delta, jdbc, kafka)."""
    max_bytes: int | str | None = None
    """At most this many bytes of input (files, delta)."""
    max_files: int | None = Field(default=None, ge=1)
    """At most this many files (files, delta)."""

    @field_validator("max_bytes")
    @classmethod
    def _bytes(cls, value: int | str | None) -> int | None:
        return parse_bytes(value)

    def budget(self) -> Budget:
        return Budget(self.max_records, parse_bytes(self.max_bytes), self.max_files)


class SourceLimitsConf(LimitsConf):
    """Limits for the whole run of this source, and ``per_dataset``."""

    per_dataset: LimitsConf = LimitsConf()
    """Limits for each dataset."""


class SourceConf(PluginConf):
    """What every source shares: throttling and a bounded backfill range."""

    limits: SourceLimitsConf = SourceLimitsConf()
    """Throttling per run and per dataset; datasets throttled out keep their watermark."""
    from_: str | None = Field(default=None, alias="from")
    """Backfill: read from here (a watermark value: a timestamp, version or id) with its own
    bookkeeping; the live watermark does not move."""
    to: str | None = None
    """Backfill: read up to here (exclusive for timestamps and file times, inclusive for versions and ids)."""

    @property
    def backfill(self) -> bool:
        return self.from_ is not None or self.to is not None

    def schema_ddl(self) -> str | None:
        """The schema the config declares, as a Spark DDL string; ``None`` when the source knows
        its own (a table's) or infers it. Raises :class:`~engine.errors.ConfigError` for a schema
        that cannot be read (the compiler adds the ``schema`` key)."""
        return None

    @property
    def infers_schema(self) -> bool:
        """Whether planning must read input to learn the schema (a Spark job): ``mode=validate``
        then only parses SQL instead of checking the chain over a schema."""
        return False

    def inputs(self) -> dict[str, str]:
        """Each input path as configured, with the part an upstream DAG must write for it to count
        as made upstream (a glob's fixed prefix); a source reading no path gives none."""
        return {}

    def names_dataset(self, urn: str) -> bool:
        """Whether ``urn`` is the URN of one of the datasets this source reads, as far as its config
        tells (``mode=checkpoint`` setting a dataset no run has read yet); ``False`` when unsure."""
        return False

    def lineage(self) -> list[DatasetName]:
        """What it reads: each input path (a glob's fixed prefix, the directory it reads in)."""
        return sorted({of_path(prefix) for prefix in self.inputs().values()})


class FilesSourceConf(SourceConf):
    """Files on any Hadoop file system, read with one of Spark's built-in formats.

    A relative ``path`` or schema file is resolved against the job file's directory. The schema is
    an Avro schema file (``.avsc``), an inline Avro JSON schema, or a Spark DDL string; without one
    Spark infers it (JSON and CSV: once, from the first files read, then pinned in
    ``_engine/schemas``). Malformed JSON/CSV records (and values that do not fit the schema) are
    not dropped: they go to the error table from the ``read`` step, naming the column and type.
    A file that cannot be read fails its dataset unless ``on_corrupt = skip``.

    .. code-block:: hocon

        sources.orders {
          type = files
          format = json
          path = data/orders/*.json
          schema = schemas/orders.avsc
          options { multiLine = false }
          on_corrupt = skip
        }
    """

    type: Literal["files"] = "files"
    path: str | list[str]
    """A path or glob (or a list of them); relative paths are relative to the job file."""
    format: Literal["json", "csv", "parquet", "avro", "text"]
    """The file format, read by Spark's own reader."""
    schema_: str | None = Field(default=None, alias="schema")
    """An ``.avsc`` file, an inline Avro schema (JSON) or a Spark DDL string. Unset: Parquet and Avro
    use the files' own; JSON and CSV types are inferred from the first run's files and pinned, so
    later runs read with the same types (a changed ``format`` or ``options`` infers again)."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra options handed to Spark's reader (``header``, ``sep``, ``multiLine``, ...)."""
    incremental: Literal["new_files", "partitions", "none"] = "new_files"
    """``new_files``: each run reads the files not read before (the file log knows which),
    ordered by (modification time, path). ``partitions``: each run reads the date partitions
    after the last one read. ``none``: each run reads everything."""
    datasets: Literal["single", "directory"] = "single"
    """``single``: all matched files are one dataset. ``directory``: each directory holding matched
    files (or, with ``partitions``, each matched root) is a dataset with its own watermark."""
    min_age: float | int | str = 0
    """Skip files modified less than this long ago (still being written): ``30s``, ``5m``."""
    lookback: float | int | str = 3600.0
    """Only for a watermark stored by an engine before the file log (which kept the files read
    within this window of it): older files count as read. Late files are otherwise found by the
    file log, whatever their modification time."""
    partitions: PartitionsConf | None = None
    """With ``incremental = partitions``: the partition directory layout under each path."""
    on_corrupt: Literal["fail", "skip"] = "fail"
    """A file that cannot be read (a truncated gzip, a broken Parquet file). ``fail``: its dataset
    fails, on every run until the file is fixed or removed. ``skip``: the rest is read; the file
    becomes one error record of step ``read`` (its path, Spark's error) and a note on the dataset's
    status, and is logged in the file log as read (with the error), so it is not read again unless
    it is replaced (new modification time or size)."""

    changed_files: Literal["tail", "whole"] = "tail"
    """A file read before that has changed since (another size or modification time). ``tail``: a
    file of lines grown by whole lines was appended to, and only its new bytes are read; any other
    change reads it again whole. ``whole``: every changed file is read again whole, for producers
    that rewrite files in place with more lines (an append cannot be told from such a rewrite by
    size alone); the note names the sinks that then hold its earlier records twice."""

    @field_validator("min_age", "lookback")
    @classmethod
    def _duration(cls, value: float | int | str) -> float:
        return parse_seconds(value)

    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)

    def resolved(self, anchors: Anchors) -> FilesSourceConf:
        """Relative local paths (and an ``.avsc`` schema file) made absolute against the job file."""
        paths = [anchors.from_job_file(p) for p in self.paths()]
        schema = self.schema_
        if schema is not None and schema.endswith(".avsc"):
            schema = anchors.from_job_file(schema)
        return self.model_copy(update={"path": paths, "schema_": schema})

    @property
    def infers_schema(self) -> bool:
        return self.schema_ is None and self.format in ("json", "csv")

    def inputs(self) -> dict[str, str]:
        return {p: fixed_prefix(p) for p in self.paths()}

    @field_validator("from_", "to")
    @classmethod
    def _a_time(cls, value: str | None) -> str | None:
        """A backfill bound of files is a time (of modification, or of a partition's start): one
        that is not is refused while compiling, not only when a run plans."""
        if value is not None:
            try:
                parse_timestamp(value)
            except ValueError:
                raise ValueError(
                    f"`{value}` is not a timestamp: a files source's backfill bound is an ISO 8601 date or time "
                    "(`2026-11-01`, `2026-11-01 10:00:00`)"
                ) from None
        return value

    def names_dataset(self, urn: str) -> bool:
        if not urn.startswith("files:"):
            return False
        if self.datasets == "single" and self.incremental != "partitions":
            return urn == f"files:{self.paths()[0]}"
        place = _unschemed(urn[len("files:") :]).rstrip("/")
        return any(place.startswith(_unschemed(fixed_prefix(p)).rstrip("/") + "/") for p in self.paths())

    def schema_ddl(self) -> str | None:
        """The schema as a Spark DDL string (Avro schemas converted), or ``None`` to infer."""
        if self.schema_ is None:
            return None
        if self.schema_.endswith(".avsc"):
            return avro_to_ddl(load_avro_schema(Path(self.schema_)))
        if self.schema_.lstrip().startswith("{"):
            return avro_to_ddl(load_avro_schema(self.schema_))
        return self.schema_


class PartitionsConf(BaseModel):
    """Date-partitioned directories, e.g. ``pattern = "yyyy/MM/dd"`` or ``"dt=yyyy-MM-dd/HH"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    """The partition path under the dataset root with ``yyyy``, ``MM``, ``dd``, ``HH`` fields."""
    delay: float | int | str = 0
    """A partition is read once its end is this long in the past (``1h``): late data settles."""
    start: str | None = None
    """The first partition to read when a dataset has no watermark (default: all)."""

    @field_validator("delay")
    @classmethod
    def _duration(cls, value: float | int | str) -> float:
        return parse_seconds(value)

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        if "yyyy" not in value:
            raise ValueError("the partition pattern needs at least `yyyy` (e.g. yyyy/MM/dd)")
        return value.strip("/")


def _unschemed(path: str) -> str:
    """A local path without its ``file:`` scheme (``file:/in`` and ``/in`` are one place)."""
    return re.sub(r"^file:(//)?", "", path)


def fixed_prefix(path: str) -> str:
    """The part of a glob before its first wildcard segment (the whole path if it has none)."""
    if not _GLOB.search(path):
        return path
    head = _GLOB.split(path, 1)[0]
    return head.rsplit("/", 1)[0] if "/" in head else "."


class DeltaSourceConf(SourceConf):
    """A Delta table read incrementally by version: the table version is the watermark.

    The first run reads the snapshot at the latest version; each later run reads what the
    versions after the watermark added. ``changes = appends`` (default) is for append-only tables:
    a version that updates or deletes rows is refused with its number and operation.
    ``changes = cdf`` reads the table's change data feed instead (``delta.enableChangeDataFeed``
    must be on); records then carry ``_change_type``, ``_commit_version`` and ``_commit_timestamp``
    (``update_preimage`` rows are left out). Backfill ``from``/``to`` are versions (inclusive).

    .. code-block:: hocon

        sources.events { type = delta, path = bronze/events, limits.max_records = 1000000 }
    """

    type: Literal["delta"] = "delta"
    path: str
    """The table's location; relative paths are relative to the ``warehouse``."""
    changes: Literal["appends", "cdf"] = "appends"
    """``appends``: new files of append-only versions. ``cdf``: the change data feed."""

    def resolved(self, anchors: Anchors) -> DeltaSourceConf:
        return self.model_copy(update={"path": anchors.under_warehouse(self.path)})

    def inputs(self) -> dict[str, str]:
        return {self.path: self.path}

    @field_validator("from_", "to")
    @classmethod
    def _a_version(cls, value: str | None) -> str | None:
        """A backfill bound of a Delta table is a version: a whole number, 0 or more."""
        if value is not None and not value.strip().isdigit():
            raise ValueError(f"`{value}` is not a table version: a Delta source's backfill bound is a whole number")
        return value

    def dataset_urn(self) -> str:
        """The URN of the one dataset it reads."""
        return f"delta:{self.path}"

    def names_dataset(self, urn: str) -> bool:
        return urn == self.dataset_urn()


class JdbcIncrementalConf(BaseModel):
    """The column that orders new rows: an id or a modification timestamp."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    column: str
    """A numeric or timestamp column; rows with a NULL there are never read (counted and logged)."""
    kind: Literal["auto", "long", "timestamp"] = "auto"
    """The watermark kind; ``auto`` follows the column's type."""
    lag: float | int | str = 0
    """Timestamps only: leave rows newer than this (``5m``) for the next run, so transactions
    still open when the run starts (committed later with older timestamps) are not skipped."""

    @field_validator("lag")
    @classmethod
    def _duration(cls, value: float | int | str) -> float:
        return parse_seconds(value)


class JdbcSourceConf(SourceConf):
    """A database table or query over JDBC, read incrementally by a column in parallel ranges.

    .. code-block:: hocon

        sources.orders {
          type = jdbc
          url = "jdbc:postgresql://db:5432/shop"
          table = public.orders
          user = ingest
          password = ${?SHOP_DB_PASSWORD}
          incremental { column = id }
          partitions = 8
        }
    """

    type: Literal["jdbc"] = "jdbc"
    url: str
    """The JDBC URL (credentials go in ``user``/``password``, which are redacted)."""
    table: str | None = None
    """A table (or view) name; or give ``query``."""
    query: str | None = None
    """A SELECT whose rows are the source (wrapped as a subquery)."""
    user: str | None = None
    """The database user (may be ``ENC(...)``)."""
    password: str | None = None
    """The database password (redacted in output; may be ``ENC(...)``)."""
    driver: str | None = None
    """The driver class; Spark infers it from the URL for common databases."""
    incremental: JdbcIncrementalConf | None = None
    """Read only rows whose column is above the watermark; without it every run reads everything."""
    partitions: int = Field(default=4, ge=1)
    """Parallel reads, each a range of the incremental column between the low and high bounds."""
    fetch_size: int = Field(default=10_000, ge=1)
    """Rows per round trip."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra options for Spark's JDBC reader."""

    @model_validator(mode="after")
    def _one_of(self) -> JdbcSourceConf:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of `table` and `query`")
        return self

    def relation(self) -> str:
        """What goes after FROM: the table, or the query as a subquery."""
        if self.query:
            return f"({self.query}) engine_src"
        assert self.table is not None
        return self.table

    def lineage(self) -> list[DatasetName]:
        """Its table; nothing for a query (the tables it joins are the database's to say)."""
        return [of_jdbc(self.url, self.table)] if self.table else []

    def dataset_urn(self) -> str:
        """The URN of the one dataset it reads: the URL (without its query, which may hold a
        password) and the table, or a digest of the query: the text's ``hash`` under spark-submit's
        ``PYTHONHASHSEED=0``, as URNs were stored, whatever process computes it (:mod:`engine.sources.stable_hash`)."""
        url = self.url.split("?", 1)[0]
        what = self.table or f"query:{abs(seed0_str_hash(self.query or '')) % 10**10}"
        return f"jdbc:{url}/{what}"

    def names_dataset(self, urn: str) -> bool:
        return urn == self.dataset_urn()


class KafkaSourceConf(SourceConf):
    """Kafka topics read in batches: each topic is a dataset, its watermark the next offset of each
    partition (``multi_long``, indexed by partition number).

    Planning asks the brokers (Kafka's own client, in the driver) for each partition's first and
    end offsets and fixes this run's end offsets in the stored batch plan before anything is read,
    so a retry of the batch reads exactly the same records. A new partition starts at its first
    offset; a new topic at ``starting_offsets``. Data that is gone is never skipped silently:
    offsets below a partition's first offset (retention ran first), offsets above its end (the
    topic was deleted and re-created) or a partition that went away stop the DAG, naming topic,
    partition and offsets, unless ``on_data_loss = skip``, which reads on from what is there and
    records each gap (partition, from, to, count) in the dataset's status note.

    Values are parsed by ``format``: ``json`` and ``avro`` need ``schema`` (a Spark DDL string,
    an ``.avsc`` file or an inline Avro schema; ``avro`` needs an Avro one). A value that does not
    parse goes to the error table (step ``read``) with its topic, partition, offset, key and raw
    value. Every record also carries ``kafka_key``, ``kafka_topic``, ``kafka_partition``,
    ``kafka_offset``, ``kafka_timestamp`` and ``kafka_headers``.

    .. code-block:: hocon

        sources.events {
          type = kafka
          bootstrap_servers = "broker1:9092,broker2:9092"
          topics = [orders, payments]          # or: pattern = "shop\\\\..*"
          format = json
          schema = schemas/event.avsc
          limits.max_records = 5000000
          options { "security.protocol" = SASL_SSL, "sasl.mechanism" = PLAIN, "sasl.jaas.config" = ${?JAAS} }
        }
    """

    type: Literal["kafka"] = "kafka"
    bootstrap_servers: str
    """``host:port`` of one or more brokers, comma-separated."""
    topics: list[str] | None = None
    """The topics to read, each its own dataset; or give ``pattern``."""
    pattern: str | None = None
    """A regular expression a topic's whole name must match (topics starting ``__`` are Kafka's own)."""
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    """Where a topic with no watermark starts: its first offsets, or its end (only what comes after)."""
    on_data_loss: Literal["fail", "skip"] = "fail"
    """Offsets the watermark needs that are gone. ``fail``: the DAG stops and names them. ``skip``:
    read from the first offset still there and note the gap on the dataset's status."""
    format: Literal["json", "avro", "string", "bytes"] = "json"
    """How values are read: parsed by ``schema`` (``json``, ``avro``), or kept whole in a ``value``
    column (``string``: UTF-8 text, ``bytes``: binary)."""
    schema_: str | None = Field(default=None, alias="schema")
    """The value's schema: a Spark DDL string, an ``.avsc`` file or an inline Avro schema (JSON)."""
    confluent_wire: bool = False
    """``avro``: values carry the Confluent wire format's 5-byte header (magic byte 0, schema id),
    which is stripped; a value without it is an error record."""
    key_format: Literal["string", "bytes"] = "string"
    """``kafka_key`` as UTF-8 text or binary."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Kafka client properties (``security.protocol``, ``sasl.*``, ``ssl.*``, ...), given both to
    the planning client and to Spark's reader (as ``kafka.<property>``)."""
    min_partitions: int | None = Field(default=None, ge=1)
    """Spark tasks to read with; unset, one per topic partition (Spark splits large partitions)."""
    timeout: float | int | str = 30.0
    """How long planning waits for the brokers before the DAG fails (``30s``, ``2m``)."""

    @field_validator("timeout")
    @classmethod
    def _duration(cls, value: float | int | str) -> float:
        return parse_seconds(value)

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"`{value}` is not a regular expression: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _checked(self) -> KafkaSourceConf:
        if (self.topics is None) == (self.pattern is None):
            raise ValueError("give exactly one of `topics` and `pattern`")
        if self.topics is not None and (not self.topics or not all(t.strip() for t in self.topics)):
            raise ValueError("`topics` lists no topic (or an empty name)")
        if self.format in ("json", "avro") and self.schema_ is None:
            raise ValueError(f"format = {self.format} needs `schema` (a DDL string, an .avsc file or an Avro schema)")
        if self.format == "avro" and self.schema_ is not None and not _is_avro(self.schema_):
            raise ValueError("format = avro needs an Avro `schema` (an .avsc file or an inline Avro schema)")
        if self.format not in ("json", "avro") and self.schema_ is not None:
            raise ValueError(f"format = {self.format} keeps the value whole: leave `schema` out")
        if self.confluent_wire and self.format != "avro":
            raise ValueError("`confluent_wire` is for format = avro")
        return self

    def lineage(self) -> list[DatasetName]:
        """Its topics; nothing for a ``pattern`` (the topics it matched are the run's datasets)."""
        return [of_kafka(self.bootstrap_servers, t) for t in self.topics or ()]

    def names_dataset(self, urn: str) -> bool:
        topic = urn.removeprefix("kafka:")
        if not urn.startswith("kafka:"):
            return False
        return topic in (self.topics or []) or (
            self.pattern is not None and re.fullmatch(self.pattern, topic) is not None
        )

    def resolved(self, anchors: Anchors) -> KafkaSourceConf:
        schema = self.schema_
        if schema is not None and schema.endswith(".avsc"):
            schema = anchors.from_job_file(schema)
        return self.model_copy(update={"schema_": schema})

    def schema_ddl(self) -> str | None:
        """The value's schema as a Spark DDL string (``None`` for ``string``/``bytes``)."""
        if self.schema_ is None:
            return None
        if _is_avro(self.schema_):
            return avro_to_ddl(load_avro_schema(self.avro_source()))
        return self.schema_

    def avro_source(self) -> Path | str:
        assert self.schema_ is not None
        return Path(self.schema_) if self.schema_.endswith(".avsc") else self.schema_

    def client_properties(self) -> dict[str, str]:
        """The Kafka client's properties: the brokers and ``options`` (booleans as ``true``/``false``)."""
        return {"bootstrap.servers": self.bootstrap_servers, **option_texts(self.options)}


def _is_avro(schema: str) -> bool:
    return schema.endswith(".avsc") or schema.lstrip().startswith("{")


class ErrorRowsConf(SourceConf):
    """Rows of an error table to read again (``mode=replay``), built by the engine, never written
    in a job: the rows one DAG rejected, at the table's latest version when planned, less those a
    replay already published (``marks``), parsed back into the records the DAG's source read.

    A rejected record is stored as the text its source read it from when it did not parse (step
    ``read``: JSON, or a CSV line under ``format = csv``), else as the JSON of the record as read;
    each is parsed with ``read_schema``, and what still does not fit is rejected by step ``read``
    again, naming the column."""

    type: Literal["error_rows"] = "error_rows"
    table: str
    """The error table."""
    marks: str
    """The table of the record ids replays published (``_engine/replayed``)."""
    job: str
    dag: str
    read_schema: str
    """The schema the DAG's source reads with, as Spark DDL (its ``_corrupt_record`` column too)."""
    format: str = "json"
    """The source's format: ``csv`` parses a ``read`` rejection as a CSV line, anything else as JSON."""
    read_rows: bool = False
    """Whether its ``read`` rejections hold the text the source read (JSON and CSV files): those of
    other sources (a Kafka message's wrapper, a Parquet row) are left out of the replay."""
    options: dict[str, str] = Field(default_factory=dict)
    """The source's reader options, for the text of a ``read`` rejection (its own format's)."""
    run: str | None = None
    """Only rows rejected by this run id."""
    step: str | None = None
    """Only rows whose first failing step is this one."""
    reason: str | None = None
    """Only rows with a reason holding this text."""

    def schema_ddl(self) -> str | None:
        return self.read_schema

    def inputs(self) -> dict[str, str]:
        return {self.table: self.table}
