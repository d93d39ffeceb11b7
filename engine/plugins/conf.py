"""The base of every plugin config: typed, frozen, and strict about unknown keys.

The hooks here are what the compiler asks of any plugin, so it never tests for a specific one:
how a config's relative paths are made absolute (:meth:`PluginConf.resolved`), which places it
writes (:meth:`PluginConf.writes`), what it names to lineage systems (:meth:`PluginConf.lineage`).
Source, converter and sink configs add their own kind's hooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from typing_extensions import Self

from engine.plugins.lineage import DatasetName, of_path
from engine.storage.paths import StoragePath, is_relative, under

_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_seconds(value: float | int | str) -> float:
    """``30``, ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"`` -> seconds."""
    if isinstance(value, int | float):
        return float(value)
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", value.lower())
    if not found:
        raise ValueError(f"`{value}` is not a duration (use e.g. 30s, 15m, 2h, 1d)")
    return float(found.group(1)) * _SECONDS[found.group(2) or "s"]


def option_texts(options: dict[str, str | int | float | bool]) -> dict[str, str]:
    """Config ``options`` as a client's properties take them: text, booleans ``true``/``false``."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


@dataclass(frozen=True)
class Anchors:
    """What a config's relative paths are relative to: the job file's directory (inputs the job
    brings along) or the warehouse (what the engine writes and reads back)."""

    base_dir: Path
    """The job file's directory (the working directory for a job without a file)."""
    warehouse: str

    def from_job_file(self, path: str) -> str:
        """``path`` made absolute against the job file's directory (symbolic links followed); URLs
        (``file:/x`` too) and absolute paths as they are."""
        if not is_relative(path):
            return path
        return str(StoragePath.parse(path, base=self.base_dir, resolve=True))

    def under_warehouse(self, path: str) -> str:
        """``path`` placed under the warehouse; URLs (``file:/x`` too) and absolute paths as they are."""
        return under(path, self.warehouse)


class PluginConf(BaseModel):
    """A plugin's validated config. Unknown keys are errors; every field has a one-line doc."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    """The registry key that chose this plugin."""

    def resolved(self, anchors: Anchors) -> Self:
        """A copy whose relative paths are absolute (by default, this config: it names no path)."""
        return self

    def writes(self) -> dict[str, str]:
        """Every place this plugin writes, by the key that names it (``{"path": "/lake/orders"}``):
        the compiler refuses the engine's own places there, and a DAG reading one runs after."""
        return {}

    def lineage(self) -> list[DatasetName]:
        """The datasets this plugin reads or writes, as lineage systems name them (by default,
        the places :meth:`writes` names); one that moves records elsewhere says so itself."""
        return [of_path(p) for p in self.writes().values()]
