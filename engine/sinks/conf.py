"""Config of the built-in sinks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.plugins.conf import PluginConf


class SinkConf(PluginConf):
    """Fields every sink has."""

    from_: str = Field(default="valid", alias="from")
    """The fork branch whose records this sink writes: ``valid``, ``error`` or a named branch."""


class TableSinkConf(SinkConf):
    """Write a branch as a Delta table or as Parquet, Avro, JSON or CSV files.

    A relative ``path`` is relative to the ``warehouse``. ``mode`` is ``append`` or ``overwrite``.

    .. code-block:: hocon

        sinks.lake {
          type = delta
          from = valid
          path = orders
          mode = append
          partition_by = [order_date]
        }
    """

    type: Literal["delta", "parquet", "avro", "json", "csv"]
    path: str
    """Where to write; relative to the warehouse unless absolute or a URL."""
    mode: Literal["append", "overwrite", "merge"] = "append"
    """``append`` adds records; ``overwrite`` replaces what the path holds; ``merge`` (Delta only)
    updates the rows whose ``keys`` match and inserts the others."""
    keys: list[str] = []
    """The columns that identify a row for ``mode = merge`` (null-safe equality)."""
    partition_by: list[str] = []
    """Columns to partition the output by."""
    options: dict[str, str | int | float | bool] = {}
    """Extra options handed to Spark's writer."""

    @model_validator(mode="after")
    def _merge_needs_keys(self) -> TableSinkConf:
        if self.mode == "merge" and self.type != "delta":
            raise ValueError(f"mode `merge` needs a Delta sink, not `{self.type}`")
        if self.mode == "merge" and not self.keys:
            raise ValueError("mode `merge` needs `keys`: the columns that identify a row")
        if self.keys and self.mode != "merge":
            raise ValueError("`keys` is only used with mode `merge`")
        return self


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
