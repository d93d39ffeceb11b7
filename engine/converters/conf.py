"""Config of the built-in converters. Every step may reject records; none drops them silently."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator
from typing_extensions import Self

from engine.converters.sqltext import JoinCondition, Refused, join_condition, parsed, trimmed
from engine.plugins.conf import Anchors, PluginConf
from engine.plugins.lineage import DatasetName, of_jdbc, of_path, shown_url
from engine.plugins.sizes import parse_bytes
from engine.plugins.threshold import ThresholdValue

Action = Literal["reject", "warn", "fail"]


class ConverterConf(PluginConf):
    """Fields every converter step has."""

    name: str | None = None
    """The step's name in the error table; defaults to its type (suffixed when repeated)."""

    def sql_expressions(self) -> list[str]:
        """The Spark SQL expressions this step evaluates (parsed by ``mode=validate``)."""
        return []

    def inputs(self) -> dict[str, str]:
        """The paths it reads (a lookup's reference), each with itself to compare with what an
        upstream DAG writes (as :meth:`SourceConf.inputs <engine.sources.conf.SourceConf.inputs>`)."""
        return {}


class RuleConf(ConverterConf):
    """A step that tests records (a rule): what a record that fails it comes to.

    .. code-block:: hocon

        { type = check, expr = "amount >= 0", action = warn, max_rejected = "2%" }
    """

    action: Action = "reject"
    """``reject``: the record goes to the error table; ``warn``: it is counted and passes;
    ``fail``: any record failing the rule fails the batch (nothing of its dataset is published,
    its watermark stays)."""
    max_rejected: ThresholdValue | None = None
    """The most records of a dataset's batch the rule may flag (rejected, or counted under
    ``warn``): a count (``25``) or a share of the records read (``"2%"``); one more fails the batch."""

    @model_validator(mode="after")
    def _fail_has_no_threshold(self) -> Self:
        if self.action == "fail" and self.max_rejected is not None:
            raise ValueError("`max_rejected` does not apply to `action = fail` (one record fails the batch)")
        return self

    @property
    def counted(self) -> bool:
        """Whether a run counts the records it flags (to judge the batch, or to report warnings)."""
        return self.action != "reject" or self.max_rejected is not None


class CastConf(RuleConf):
    """Cast columns to Spark SQL types; a non-null value that does not convert rejects the record.

    .. code-block:: hocon

        { type = cast, columns { amount = "decimal(12,2)", qty = int } }
    """

    type: Literal["cast"] = "cast"
    columns: dict[str, str] = Field(min_length=1)
    """Column name to Spark SQL type."""

    def sql_expressions(self) -> list[str]:
        return [f"CAST(NULL AS {t})" for t in self.columns.values()]


class RenameConf(ConverterConf):
    """Rename columns. ``{ type = rename, columns { cust = customer_id } }``"""

    type: Literal["rename"] = "rename"
    columns: dict[str, str] = Field(min_length=1)
    """Old name to new name."""


class SelectConf(ConverterConf):
    """Keep only these columns, in this order. ``{ type = select, columns = [id, amount] }``"""

    type: Literal["select"] = "select"
    columns: list[str] = Field(min_length=1)
    """Column names to keep."""


class DropConf(ConverterConf):
    """Drop columns. ``{ type = drop, columns = [debug_blob] }``"""

    type: Literal["drop"] = "drop"
    columns: list[str] = Field(min_length=1)
    """Column names to drop."""


class DeriveConf(ConverterConf):
    """Add or replace columns from Spark SQL expressions.

    .. code-block:: hocon

        { type = derive, columns { total = "qty * price", day = "to_date(created_at)" } }
    """

    type: Literal["derive"] = "derive"
    columns: dict[str, str] = Field(min_length=1)
    """Column name to a Spark SQL expression."""

    def sql_expressions(self) -> list[str]:
        return list(self.columns.values())


class RequireConf(RuleConf):
    """Reject records where any of these columns is null. ``{ type = require, columns = [id] }``"""

    type: Literal["require"] = "require"
    columns: list[str] = Field(min_length=1)
    """Columns that must not be null."""


class CheckConf(RuleConf):
    """Reject records for which a boolean Spark SQL expression is false or null.

    .. code-block:: hocon

        { type = check, expr = "amount >= 0", reason = "negative amount" }
    """

    type: Literal["check"] = "check"
    expr: str
    """A boolean Spark SQL expression that valid records satisfy."""
    reason: str | None = None
    """The reason recorded for a rejected record; defaults to the expression."""

    def sql_expressions(self) -> list[str]:
        return [self.expr]


class ExpectConf(CheckConf):
    """An expectation: a boolean Spark SQL expression records should satisfy, counted when they do
    not. It warns unless told otherwise (``action = reject`` or ``fail``, ``max_rejected``).

    .. code-block:: hocon

        { type = expect, expr = "discount <= price", max_rejected = "1%" }
    """

    type: Literal["expect"] = "expect"  # type: ignore[assignment]
    action: Action = "warn"


class RegexConf(RuleConf):
    """Reject records whose column does not match a Java regular expression (nulls pass).

    .. code-block:: hocon

        { type = regex, column = email, pattern = "^[^@]+@[^@]+$" }
    """

    type: Literal["regex"] = "regex"
    column: str
    """The string column to test."""
    pattern: str
    """A Java regular expression the whole value must match."""
    reason: str | None = None
    """The reason recorded for a rejected record."""


class ParseTimestampConf(RuleConf):
    """Parse a string column into a timestamp; a non-null value that does not parse rejects.

    .. code-block:: hocon

        { type = parse_timestamp, column = created_at, format = "yyyy-MM-dd HH:mm:ss" }
    """

    type: Literal["parse_timestamp"] = "parse_timestamp"
    column: str
    """The string column to parse."""
    format: str | None = None
    """A Spark datetime pattern; ISO-8601 when unset."""
    target: str | None = None
    """The column to write; the source column itself when unset."""


class SqlConf(ConverterConf):
    """A Spark SQL query over the records so far, which it names ``input``.

    .. code-block:: hocon

        { type = sql, statement = "SELECT *, amount * qty AS total FROM input WHERE qty > 0" }

    The engine's columns (the raw record, its dataset) ride through the statement unnamed, so a
    later step may still reject a record with its raw text. A record the statement filters out is
    counted as dropped. Window functions and aggregations see one run's live records of one dataset
    (the batch); an aggregating statement's rows are new records, and the records it did not read
    (rejected or dropped before it) still reach the error table and the counts.
    """

    type: Literal["sql"] = "sql"
    statement: str
    """One SELECT (``WITH`` allowed) reading only ``input`` and its own ``WITH`` names. Not allowed:
    other tables, table functions, ``LIMIT``, ``TABLESAMPLE``, set operations (``UNION``),
    ``PIVOT``, subqueries in expressions, named windows, joins of the records other than a
    ``LEFT JOIN`` that matches each record once, generators (``explode``, ``stack``), names
    starting with ``__engine_``."""

    @field_validator("statement")
    @classmethod
    def _query(cls, value: str) -> str:
        try:
            parsed(value)
        except Refused as exc:
            raise ValueError(f"the statement {exc}") from exc
        return trimmed(value)


class DedupeConf(ConverterConf):
    """Keep one record per key among valid records; the others are dropped or rejected.

    .. code-block:: hocon

        { type = dedupe, keys = [order_id], order_by = ["updated_at DESC"] }
    """

    type: Literal["dedupe"] = "dedupe"
    keys: list[str] = Field(min_length=1)
    """The columns that identify a record."""
    order_by: list[str] = []
    """Spark SQL sort expressions; the first record in this order is kept."""
    on_duplicate: Literal["drop", "reject"] = "drop"
    """``drop``: duplicates are counted and discarded; ``reject``: they go to the error table."""

    def sql_expressions(self) -> list[str]:
        return [split_sort_order(o)[0] for o in self.order_by]


def split_sort_order(text: str) -> tuple[str, bool, str | None]:
    """``"ts DESC NULLS LAST"`` -> (``"ts"``, descending, ``"last"``)."""
    words = text.split()
    nulls = None
    if len(words) > 2 and words[-2].upper() == "NULLS" and words[-1].upper() in ("FIRST", "LAST"):
        nulls, words = words[-1].lower(), words[:-2]
    descending = False
    if len(words) > 1 and words[-1].upper() in ("ASC", "DESC"):
        descending, words = words[-1].upper() == "DESC", words[:-1]
    return " ".join(words), descending, nulls


class LookupConf(ConverterConf):
    """Enrich each record with columns of a reference table, matched on key columns.

    .. code-block:: hocon

        { type = lookup, path = ref/customers, on = [customer_id], columns = [name, segment],
          prefix = "customer_", on_missing = reject }
        { type = lookup, path = ref/prices, columns = [price], on_missing = reject,
          on = "input.sku = ref.sku AND input.sold_at >= ref.valid_from AND input.sold_at < ref.valid_to" }

    The reference is read once per run, at one version (a Delta table's version, fixed when the
    run first uses it), and broadcast to the join when its estimated size is at most
    ``broadcast_max``. A record whose key matches no row is kept with nulls, rejected or dropped
    (``on_missing``); a key matching several reference rows fails the batch (``duplicates =
    fail``) or takes the first of them in ``order_by`` order (``duplicates = first``).
    """

    type: Literal["lookup"] = "lookup"
    path: str | None = None
    """The reference: a Delta table or files; relative paths are relative to the ``warehouse``.
    A database table instead: ``format = jdbc`` with ``url`` and ``table`` (or a ``connection``)."""
    format: Literal["delta", "parquet", "csv", "json", "avro", "orc", "jdbc"] = "delta"
    """How the reference is stored (``jdbc`` when it has a ``url``, a ``connection``'s)."""
    schema_: str | None = Field(default=None, alias="schema")
    """A CSV or JSON reference's columns as a Spark DDL list (``customer_id BIGINT, name
    STRING``): read with these types, never inferred. Unset, Spark infers them by reading the
    reference (a Spark job) once a run, also while ``mode=validate`` checks the chain."""
    options: dict[str, str | int | float | bool] = {}
    """Spark reader options (``header = true`` for a CSV reference; ``partitionColumn``,
    ``numPartitions``... for a large database table, else read by one query)."""
    url: str | None = None
    """``format = jdbc``: the JDBC URL (with ``user``, ``password``, ``driver``: or name a
    ``connection`` of type ``jdbc``)."""
    table: str | None = None
    """``format = jdbc``: the table (or view) read whole, once a run; or give ``query``."""
    query: str | None = None
    """``format = jdbc``: a SELECT whose rows are the reference."""
    user: str | None = None
    """The database user (may be ``ENC(...)``)."""
    password: str | None = None
    """The database password (redacted in output; may be ``ENC(...)``)."""
    driver: str | None = None
    """The driver class; inferred from the URL for common databases."""
    on: list[str] | str = Field(min_length=1)
    """The key columns, named alike in the records and in the reference; or a SQL condition for a
    join that is not on equal keys, naming the records' columns ``input.<column>`` and the
    reference's ``ref.<column>``. A condition without an equality between the two sides joins
    every record with every reference row (cheap only for a broadcast reference); a record's
    matches are counted (``duplicates``) after the join, through a shuffle of the joined rows."""
    columns: list[str] = []
    """The reference columns each record gets; every one but the keys (all of them, for a
    condition) when empty."""
    prefix: str = ""
    """Put before each brought column's name (a record column of the same name is a config error)."""
    on_missing: Literal["keep", "reject", "drop"] = "keep"
    """A record without a match: ``keep`` (brought columns null), ``reject`` (to the error table,
    the reason naming the lookup and the key values), ``drop`` (counted as dropped)."""
    duplicates: Literal["fail", "first"] = "fail"
    """A key with several reference rows: ``fail`` the batch when a record has it (naming the key),
    or take the ``first`` row in ``order_by`` order."""
    order_by: list[str] = []
    """Spark SQL sort expressions over the reference choosing the ``first`` row; by default the
    brought columns, ascending, so the choice does not depend on the reference's file order."""
    broadcast_max: int | str = "64m"
    """The largest estimated reference size broadcast to every executor (a shuffle join above it)."""

    @field_validator("broadcast_max")
    @classmethod
    def _size(cls, value: int | str) -> int | str:
        parse_bytes(value)  # a size that does not parse is a config error naming the key
        return value

    @model_validator(mode="before")
    @classmethod
    def _database(cls, data: object) -> object:
        """A reference given a ``url`` (a ``connection``'s) is a database table unless ``format`` says."""
        if isinstance(data, dict) and data.get("url") is not None and data.get("format") is None:
            return {**data, "format": "jdbc"}
        return data

    @model_validator(mode="after")
    def _where(self) -> Self:
        database = {"url": self.url, "table": self.table, "query": self.query, "user": self.user}
        database |= {"password": self.password, "driver": self.driver}
        if self.schema_ is not None and self.format not in ("csv", "json"):
            raise ValueError(f"`schema` is for a csv or json reference; a {self.format} one has its own")
        if self.format != "jdbc":
            if self.path is None:
                raise ValueError("give the reference's `path` (or `format = jdbc` and a database table)")
            given = [k for k, v in database.items() if v is not None]
            if given:
                raise ValueError(f"`{given[0]}` is for a database reference (`format = jdbc`), not a {self.format} one")
            return self
        if self.path is not None:
            raise ValueError("a database reference (`format = jdbc`) has no `path`: give `table` or `query`")
        if self.url is None:
            raise ValueError("a database reference (`format = jdbc`) needs `url` (or a `connection`)")
        if (self.table is None) == (self.query is None):
            raise ValueError("a database reference (`format = jdbc`) needs exactly one of `table` and `query`")
        return self

    @property
    def reference(self) -> str:
        """What the reference is, for messages: its path, or its database table (no credentials)."""
        if self.path is not None:
            return self.path
        return f"{shown_url(self.url or '')} {f'table {self.table}' if self.table else 'query'}"

    @field_validator("on")
    @classmethod
    def _condition(cls, value: list[str] | str) -> list[str] | str:
        if isinstance(value, str):
            try:
                join_condition(value)
            except Refused as exc:
                raise ValueError(f"the join condition {exc}") from exc
        return value

    @property
    def condition(self) -> JoinCondition | None:
        """``on`` as a join condition; ``None`` for key columns."""
        return join_condition(self.on) if isinstance(self.on, str) else None

    @property
    def broadcast_bytes(self) -> int:
        return parse_bytes(self.broadcast_max) or 0

    def resolved(self, anchors: Anchors) -> LookupConf:
        if self.path is None:
            return self
        return self.model_copy(update={"path": anchors.under_warehouse(self.path)})

    def sql_expressions(self) -> list[str]:
        return [split_sort_order(o)[0] for o in self.order_by]

    def inputs(self) -> dict[str, str]:
        return {self.path: self.path} if self.path is not None else {}

    def lineage(self) -> list[DatasetName]:
        if self.path is not None:
            return [of_path(self.path)]
        return [of_jdbc(self.url or "", self.table)] if self.table else []
