"""Config of the built-in sinks.

:class:`SinkConf` carries the hooks the compiler and the runtime ask of every sink: the places it
writes (:meth:`~engine.plugins.conf.PluginConf.writes`), whether it writes a branch that is
empty this run (:attr:`SinkConf.stages_empty`) and what reading a range again does to it
(:meth:`SinkConf.on_replay`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator
from typing_extensions import Self

from engine.plugins.conf import Anchors, PluginConf

ReplayEffect = Literal["DUPLICATES", "REPLACED", "SAFE", "SHOWN", "UNKNOWN"]
"""What a sink ends up with when its DAG reads a range again: the records twice, only the
re-read range, the same rows (idempotent), the records printed again, or nobody knows."""


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


class TableSinkConf(SinkConf):
    """What the Delta and the file sinks share: a path under the warehouse, a mode, partitions.

    A relative ``path`` is relative to the ``warehouse``."""

    type: Literal["delta", "parquet", "avro", "json", "csv"]
    path: str
    """Where to write; relative to the warehouse unless absolute or a URL."""
    mode: Literal["append", "overwrite", "merge"] = "append"
    """``append`` adds records; ``overwrite`` replaces what the path holds; ``merge`` (Delta only)
    updates the rows whose ``keys`` match and inserts the others."""
    keys: list[str] = Field(default_factory=list)
    """The columns that identify a row for ``mode = merge`` (null-safe equality)."""
    partition_by: list[str] = Field(default_factory=list)
    """Columns to partition the output by."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
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
        if self.mode == "overwrite":
            return OnReplay(what, "REPLACED", "will hold only what the next run reads")
        return OnReplay(what, "DUPLICATES", "appends the records again: rows already there are duplicated")

    def writes(self) -> dict[str, str]:
        return {"path": self.path}


class DeltaSinkConf(TableSinkConf):
    """Write a branch as a Delta table: ``append``, ``overwrite``, or ``merge`` on ``keys``.

    .. code-block:: hocon

        sinks.lake {
          type = delta
          from = valid
          path = orders
          mode = append
          partition_by = [order_date]
        }
    """

    type: Literal["delta"]


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
