"""Config of the built-in converters. Every step may reject records; none drops them silently."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.plugins.conf import PluginConf


class ConverterConf(PluginConf):
    """Fields every converter step has."""

    name: str | None = None
    """The step's name in the error table; defaults to its type (suffixed when repeated)."""

    def sql_expressions(self) -> list[str]:
        """The Spark SQL expressions this step evaluates (parsed by ``mode=validate``)."""
        return []


class CastConf(ConverterConf):
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


class RequireConf(ConverterConf):
    """Reject records where any of these columns is null. ``{ type = require, columns = [id] }``"""

    type: Literal["require"] = "require"
    columns: list[str] = Field(min_length=1)
    """Columns that must not be null."""


class CheckConf(ConverterConf):
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


class RegexConf(ConverterConf):
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


class ParseTimestampConf(ConverterConf):
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
