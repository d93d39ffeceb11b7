"""Config of the built-in sinks.

:class:`SinkConf` carries the hooks the compiler and the runtime ask of every sink: the places it
writes (:meth:`~engine.plugins.conf.PluginConf.writes`), whether it writes a branch that is
empty this run (:attr:`SinkConf.stages_empty`) and what reading a range again does to it
(:meth:`SinkConf.on_replay`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator
from typing_extensions import Self

from engine.plugins.conf import Anchors, PluginConf, option_texts, parse_seconds
from engine.plugins.lineage import DatasetName, of_jdbc, of_kafka

ReplayEffect = Literal["DUPLICATES", "REPLACED", "SAFE", "SHOWN", "UNKNOWN"]
"""What a sink ends up with when its DAG reads a range again: the records twice, only the
re-read range, the same rows (idempotent), the records printed again, or nobody knows."""


@dataclass(frozen=True)
class Repeats:
    """What a sink that holds one row per key does with a batch's rows that share a key (its
    ``duplicates``, :mod:`engine.sinks.repeats`): ``reject`` them into the error table, ``fail``
    the batch, or keep the last row by the ``last_by`` columns. Rows that are the same in every
    column are one row whatever the rule: keeping one of them is no guess."""

    action: Literal["reject", "fail", "last_by"]
    last_by: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Repeats:
        """``reject``, ``fail`` or ``last_by <column>[, <column> ...]``; a ``ValueError`` saying
        what is allowed otherwise."""
        word, _, rest = text.strip().partition(" ")
        columns = tuple(c.strip("`") for c in rest.replace(",", " ").split())
        if word in ("reject", "fail") and not columns:
            return cls("reject" if word == "reject" else "fail")
        if word == "last_by" and columns:
            return cls("last_by", columns)
        raise ValueError(
            "`duplicates` is `reject`, `fail` or `last_by <column>` (the row greatest by that column is "
            f"kept), not `{text}`"
        )

    def __str__(self) -> str:
        return f"last_by {', '.join(self.last_by)}" if self.action == "last_by" else self.action


@dataclass(frozen=True)
class OneRowPer:
    """What a sink holds one row of per value (:meth:`SinkConf.one_row_per`)."""

    columns: list[str]
    """The key (and, for change events, the sequence)."""
    rule: Repeats
    """What it does with a batch's rows that repeat a value."""
    what: str
    """Said in messages: ``a merge keeps one row per key``."""


@dataclass(frozen=True)
class OnReplay:
    """What a sink does with a range read again (``mode=checkpoint`` moved a watermark back: the
    range is a new batch, so exactly-once per batch does not spare the sink)."""

    what: str
    """The sink's kind and mode, e.g. ``delta, mode append``."""
    effect: ReplayEffect
    why: str


class SinkConf(PluginConf):
    """Fields every sink has."""

    from_: str = Field(default="valid", alias="from")
    """The fork branch whose records this sink writes: ``valid``, ``error`` or a named branch."""

    @property
    def stages_empty(self) -> bool:
        """Whether a run whose branch holds no record still stages this sink: by default only a
        sink whose ``mode`` is ``overwrite`` (it replaces what its target holds, even with nothing)."""
        return getattr(self, "mode", None) == "overwrite"

    def on_replay(self) -> OnReplay:
        """What a range read again does to this sink; unknown unless the sink says."""
        return OnReplay(self.type, "UNKNOWN", "receives the records again: duplicates unless it is idempotent")

    def one_row_per(self) -> OneRowPer | None:
        """The columns of whose values this sink holds one row each (a merge's or an upsert's
        keys), and what it does with a batch's rows that repeat them; ``None``: it takes every row."""
        return None


class TableSinkConf(SinkConf):
    """What the Delta and the file sinks share: a path under the warehouse, a mode, partitions.

    A relative ``path`` is relative to the ``warehouse``."""

    type: Literal["delta", "parquet", "avro", "json", "csv"]
    path: str
    """Where to write; relative to the warehouse unless absolute or a URL."""
    mode: Literal["append", "overwrite", "merge", "apply_changes"] = "append"
    """``append`` adds records; ``overwrite`` replaces what the path holds; ``merge`` (Delta only)
    updates the rows whose ``keys`` match and inserts the others; ``apply_changes`` (Delta only)
    applies change events in ``sequence_by`` order (:class:`DeltaSinkConf`)."""
    keys: list[str] = Field(default_factory=list)
    """The columns that identify a row for ``mode = merge`` or ``apply_changes`` (null-safe equality)."""
    partition_by: list[str] = Field(default_factory=list)
    """Columns to partition the output by."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra options handed to Spark's writer."""
    shared: bool = False
    """Other jobs write this place too, and say so as well: without it, a place another job
    publishes to (its ``_engine_owner`` file says which) is refused (:mod:`engine.commit.owners`)."""

    @model_validator(mode="after")
    def _merge_needs_keys(self) -> TableSinkConf:
        keyed = self.mode in ("merge", "apply_changes")
        if keyed and self.type != "delta":
            raise ValueError(f"mode `{self.mode}` needs a Delta sink, not `{self.type}`")
        if keyed and not self.keys:
            raise ValueError(f"mode `{self.mode}` needs `keys`: the columns that identify a row")
        if self.keys and not keyed:
            raise ValueError("`keys` is only used with mode `merge` or `apply_changes`")
        return self

    @property
    def stages_empty(self) -> bool:
        """``overwrite`` replaces what the path holds even with nothing: the path ends up empty."""
        return self.mode == "overwrite"

    def resolved(self, anchors: Anchors) -> Self:
        return self.model_copy(update={"path": anchors.under_warehouse(self.path)})

    def on_replay(self) -> OnReplay:
        what = f"{self.type}{'' if self.type == 'delta' else ' files'}, mode {self.mode}"
        if self.mode == "merge":
            keys = ", ".join(self.keys)
            return OnReplay(f"{what} on {keys}", "SAFE", f"rows matching on ({keys}) are updated, not added again")
        if self.mode == "apply_changes":
            keys = ", ".join(self.keys)
            return OnReplay(
                f"{what} on {keys}",
                "SAFE",
                "an event whose sequence the table already holds for its key changes nothing",
            )
        if self.mode == "overwrite":
            return OnReplay(what, "REPLACED", "will hold only what the next run reads")
        return OnReplay(what, "DUPLICATES", "appends the records again: rows already there are duplicated")

    def writes(self) -> dict[str, str]:
        return {"path": self.path}


class DeltaSinkConf(TableSinkConf):
    """Write a branch as a Delta table: ``append``, ``overwrite``, ``merge`` on ``keys``, or
    ``apply_changes`` (each record an insert, update or delete event of its key).

    .. code-block:: hocon

        sinks.lake {
          type = delta
          from = valid
          path = orders
          mode = append
          partition_by = [order_date]
          schema = evolve
        }

        sinks.customers {
          type = delta, path = customers, mode = apply_changes
          keys = [customer_id], sequence_by = change_seq, delete_when = "op = 'D'", scd = 1
        }

    ``apply_changes`` (:mod:`engine.commit.apply_changes`): the events of one key apply in
    ``sequence_by`` order, in one batch and across batches; an event whose sequence is not
    greater than the table's for its key changes nothing (a late event never overwrites).

    A ``merge`` holds one row per key, and ``apply_changes`` one event per key and sequence: of a
    batch's rows that repeat one, ``duplicates`` says which is kept (an exact repeat of a whole row
    is one row): by default none, they are rejected into the error table (:class:`Repeats`)."""

    type: Literal["delta"]
    sequence_by: str | None = None
    """``apply_changes``: the column ordering the events of one key (a number, a timestamp, a
    date or a string; never null). A row moves only to a greater sequence."""
    delete_when: str | None = None
    """``apply_changes``: a SQL condition over the branch's columns marking the events that delete
    their key (``op = 'D'``); none: every event is an upsert."""
    scd: Literal[1, 2] = 1
    """``apply_changes``: ``1`` keeps the latest row per key; ``2`` keeps every version, with
    ``valid_from``, ``valid_to`` (sequences) and ``is_current``."""
    soft_delete: bool = False
    """``apply_changes`` with ``scd = 1``: a delete keeps the row and sets ``deleted_at`` (the
    delete's sequence) instead of removing it, so a late event older than the delete is refused
    across runs too."""
    tombstone_retention: float = 7 * 86400
    """``apply_changes`` with ``scd = 1`` and hard deletes: how long (``"7d"``, ``"12h"``, seconds)
    a deleted key's tombstone (its key and the delete's sequence, kept beside the table) refuses
    a late event older than the delete, which would otherwise insert the key again. A tombstone
    goes with a later batch that deletes, once older than this; ``0``: none is kept."""
    duplicates: str = "reject"
    """``merge`` (rows of one key) and ``apply_changes`` (events of one key with one
    ``sequence_by``): what to do with a batch's rows that repeat one, an exact repeat of a whole row
    being one row. ``reject`` them all into the error table, the reason naming the key (the
    default; a key repeated across two datasets of one batch fails it instead); ``fail`` the batch;
    ``last_by <column>`` (or several, ``last_by updated_at, seq``): keep the row greatest by those
    columns (rows tied on them that differ fail the batch)."""
    schema_: Literal["evolve", "freeze", "rescue"] = Field(default="evolve", alias="schema")
    """When the batch's columns differ from the table's (:mod:`engine.sinks.contract`):
    ``evolve`` adds new columns, ``freeze`` refuses any change, ``rescue`` keeps the table's
    columns and puts new columns' values and values that do not fit their type in ``_rescued``
    (JSON). Every mode casts a narrower type up (``int`` into ``bigint``) and refuses, naming the
    column, a type that does not fit (except ``rescue``)."""

    @field_validator("tombstone_retention", mode="before")
    @classmethod
    def _duration(cls, value: float | int | str) -> float:
        seconds = parse_seconds(value)
        if seconds < 0:
            raise ValueError("`tombstone_retention` is a duration: 0 or more")
        return seconds

    @field_validator("duplicates")
    @classmethod
    def _repeats(cls, value: str) -> str:
        return str(Repeats.parse(value))

    def one_row_per(self) -> OneRowPer | None:
        rule = Repeats.parse(self.duplicates)
        if self.mode == "merge":
            return OneRowPer(list(self.keys), rule, "a merge keeps one row per key")
        if self.mode == "apply_changes":
            assert self.sequence_by is not None
            return OneRowPer([*self.keys, self.sequence_by], rule, "apply_changes takes one event per key and sequence")
        return None

    @model_validator(mode="after")
    def _changes_need_a_sequence(self) -> DeltaSinkConf:
        if "duplicates" in self.model_fields_set and self.mode not in ("merge", "apply_changes"):
            raise ValueError("`duplicates` is only used with mode `merge` or `apply_changes` (on `keys`)")
        if "tombstone_retention" in self.model_fields_set and (
            self.mode != "apply_changes" or self.scd != 1 or self.soft_delete or not self.delete_when
        ):
            raise ValueError(
                "`tombstone_retention` is for mode `apply_changes` with `scd = 1`, `delete_when` and hard deletes "
                "(no `soft_delete`)"
            )
        if self.mode != "apply_changes":
            given = [k for k in ("sequence_by", "delete_when", "soft_delete") if getattr(self, k)]
            given += ["scd"] if self.scd != 1 else []
            if given:
                raise ValueError(f"`{given[0]}` is only used with mode `apply_changes`")
            return self
        if not self.sequence_by:
            raise ValueError("mode `apply_changes` needs `sequence_by`: the column ordering the events of one key")
        if self.sequence_by in self.keys:
            raise ValueError(f"`sequence_by` column `{self.sequence_by}` is one of the `keys`")
        if self.soft_delete and self.scd != 1:
            raise ValueError("`soft_delete` is for `scd = 1`: SCD2 closes the key's version on a delete")
        if self.soft_delete and not self.delete_when:
            raise ValueError("`soft_delete` needs `delete_when`: the condition marking deletes")
        return self


class FilesSinkConf(TableSinkConf):
    """Write a branch as Parquet, Avro, JSON or CSV files: ``append`` or ``overwrite``.

    .. code-block:: hocon

        sinks.export {
          type = csv
          path = exports/orders
          mode = overwrite
          options { header = true }
        }
    """

    type: Literal["parquet", "avro", "json", "csv"]


class ConsoleSinkConf(SinkConf):
    """Print the first rows of a branch to stdout (for trying jobs out).

    .. code-block:: hocon

        sinks.peek { type = console, from = error, rows = 10 }
    """

    type: Literal["console"] = "console"
    rows: int = Field(default=20, ge=1)
    """How many rows to show."""
    truncate: bool = False
    """Cut long values to 20 characters."""

    def on_replay(self) -> OnReplay:
        return OnReplay("console", "SHOWN", "prints the records again")


_PART = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+")'
_TABLE_NAME = re.compile(rf"{_PART}(?:\.{_PART}){{0,2}}")


class JdbcSinkConf(SinkConf):
    """A database table (a "dispersal" sink: the lake's records out to an online store), written
    exactly once per batch.

    Staging loads the branch into a table of its own in the target's schema
    (``engine_stage_<hash>``, by Spark's JDBC writer in parallel partitions); publishing is one
    database transaction that applies it to ``table`` and records the batch in the control table
    (``control_table``, created when missing, primary key ``(app_id, batch)``); the commit step
    looks for that record first, so a batch replayed after a crash is never applied twice. The
    target must exist with every column of the branch (its owners keep its schema).

    - ``append``: insert the rows. ``overwrite``: delete every row, then insert (one transaction).
    - ``upsert``: update the rows whose ``keys`` match, insert the others (PostgreSQL:
      ``INSERT ... ON CONFLICT (keys) DO UPDATE``, which needs a unique index on ``keys``; other
      databases: ``MERGE``). Rows of one batch with the same keys are one row if they are the same
      in every column; otherwise ``duplicates`` decides (by default they are rejected into the
      error table; ``sequence_by = v`` is ``duplicates = last_by v``).

    .. code-block:: hocon

        sinks.online {
          type = jdbc
          connection = serving_db            # url, user, password
          table = public.customers
          mode = upsert
          keys = [customer_id]
          sequence_by = kafka_offset
        }
    """

    type: Literal["jdbc"] = "jdbc"
    url: str
    """The JDBC URL (credentials go in ``user``/``password``, which are redacted)."""
    table: str
    """The target table, ``schema.table`` or ``table``."""
    user: str | None = None
    """The database user (may be ``ENC(...)``)."""
    password: str | None = None
    """The database password (redacted in output; may be ``ENC(...)``)."""
    driver: str | None = None
    """The driver class; inferred from the URL for common databases."""
    mode: Literal["append", "overwrite", "upsert"] = "append"
    """``append`` inserts, ``overwrite`` replaces the table's rows, ``upsert`` updates or inserts by ``keys``."""
    keys: list[str] = Field(default_factory=list)
    """The columns that identify a row, for ``mode = upsert``."""
    sequence_by: str | None = None
    """``upsert``: of a batch's rows with the same keys, the one with the largest value here wins
    (the same as ``duplicates = last_by <column>``)."""
    duplicates: str = "reject"
    """``upsert``: what to do with a batch's rows that share the keys, an exact repeat of a whole
    row being one row: ``reject`` them all into the error table (the default), ``fail`` the batch,
    or ``last_by <column>``: keep the row greatest by that column (:class:`DeltaSinkConf`'s)."""
    control_table: str = "engine_batches"
    """Where published batches are recorded (in the target's database; ``schema.table`` or ``table``)."""
    batch_size: int = Field(default=10_000, ge=1)
    """Rows per JDBC batch insert while staging."""
    partitions: int | None = Field(default=None, ge=1)
    """Parallel connections staging writes with (the branch is repartitioned); unset, its own partitions."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Extra options for Spark's JDBC writer and the driver (``sslmode``, ...)."""

    @field_validator("table", "control_table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _TABLE_NAME.fullmatch(value):
            raise ValueError(f"`{value}` is not a table name (`table`, `schema.table`; a part may be double-quoted)")
        return value

    @model_validator(mode="after")
    def _keys(self) -> Self:
        if self.mode == "upsert" and not self.keys:
            raise ValueError("mode `upsert` needs `keys`: the columns that identify a row")
        if self.keys and self.mode != "upsert":
            raise ValueError("`keys` is only used with mode `upsert`")
        if self.sequence_by is not None and self.mode != "upsert":
            raise ValueError("`sequence_by` is only used with mode `upsert`")
        if "duplicates" in self.model_fields_set and self.mode != "upsert":
            raise ValueError("`duplicates` is only used with mode `upsert`")
        if self.sequence_by is not None and "duplicates" in self.model_fields_set:
            raise ValueError("give `sequence_by` or `duplicates = last_by <column>`, not both")
        return self

    @field_validator("duplicates")
    @classmethod
    def _repeats(cls, value: str) -> str:
        return str(Repeats.parse(value))

    def one_row_per(self) -> OneRowPer | None:
        if self.mode != "upsert":
            return None
        rule = Repeats("last_by", (self.sequence_by,)) if self.sequence_by else Repeats.parse(self.duplicates)
        return OneRowPer(list(self.keys), rule, "an upsert keeps one row per key")

    def lineage(self) -> list[DatasetName]:
        return [of_jdbc(self.url, self.table.replace('"', ""))]

    def on_replay(self) -> OnReplay:
        what = f"jdbc table {self.table}, mode {self.mode}"
        if self.mode == "upsert":
            keys = ", ".join(self.keys)
            return OnReplay(f"{what} on {keys}", "SAFE", f"rows matching on ({keys}) are updated, not added again")
        if self.mode == "overwrite":
            return OnReplay(what, "REPLACED", "will hold only what the next run reads")
        return OnReplay(what, "DUPLICATES", "inserts the records again: rows already there are duplicated")


class KafkaSinkConf(SinkConf):
    """A Kafka topic: each record of the branch one message. **At least once**, never silently
    twice: every message carries headers ``engine.job``, ``engine.dag``, ``engine.batch`` (the
    sink's batch id, the same on every replay) and ``engine.record`` (the record's number within
    the batch, fixed when the batch is staged), so a consumer drops a repeat by (batch, record).

    Staging writes the batch's messages (key, value, headers) as Parquet under ``staging_dir``;
    publishing sends them with Spark's Kafka writer, then marks the batch sent. Messages repeat
    only when a driver dies while sending (the batch is sent again whole by the rerun); a batch
    marked sent is never sent again.

    .. code-block:: hocon

        sinks.out { type = kafka, bootstrap_servers = "broker:9092", topic = orders_clean, key = order_id }
    """

    type: Literal["kafka"] = "kafka"
    bootstrap_servers: str
    """The Kafka brokers, ``host:port`` separated by commas."""
    topic: str
    """The topic the records are sent to."""
    key: str | None = None
    """The column sent as the message key (as text); unset, no key (the producer spreads messages)."""
    format: Literal["json", "avro", "string", "bytes"] = "json"
    """The value: the record's columns (``value_columns``) as a JSON object or an Avro record, or
    one column as text (``string``) or binary (``bytes``)."""
    value_columns: list[str] | None = None
    """The columns that make the value (``json``/``avro``: all of the branch's when unset;
    ``string``/``bytes``: exactly one)."""
    schema_: str | None = Field(default=None, alias="schema")
    """``avro``: the value's Avro schema (an ``.avsc`` file or inline); unset, derived from the columns."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Kafka producer properties (``security.protocol``, ``sasl.*``, ``compression.type``, ...)."""
    staging_dir: str = "_engine/kafka_staging"
    """Where staged batches wait to be sent, relative to the warehouse."""

    @model_validator(mode="after")
    def _value(self) -> Self:
        if self.format in ("string", "bytes") and (self.value_columns is None or len(self.value_columns) != 1):
            raise ValueError(f"format = {self.format} sends one column: set `value_columns = [<column>]`")
        if self.schema_ is not None and self.format != "avro":
            raise ValueError("`schema` is for format = avro")
        return self

    def resolved(self, anchors: Anchors) -> Self:
        schema = self.schema_
        if schema is not None and schema.endswith(".avsc"):
            schema = anchors.from_job_file(schema)
        return self.model_copy(update={"staging_dir": anchors.under_warehouse(self.staging_dir), "schema_": schema})

    def client_properties(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, **option_texts(self.options)}

    def lineage(self) -> list[DatasetName]:
        return [of_kafka(self.bootstrap_servers, self.topic)]

    def on_replay(self) -> OnReplay:
        return OnReplay(
            f"kafka topic {self.topic}",
            "DUPLICATES",
            "sends the records again, in a new batch (new engine.batch headers)",
        )
