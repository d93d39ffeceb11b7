"""One registry per plugin kind, keyed by the config ``type``.

Built-ins are listed explicitly (a ``--py-files`` zip carries no entry-point metadata); third
parties add theirs through the ``engine.<kind>`` entry-point group. An entry holds the plugin's
config class (pure pydantic, importable without a JVM) and the import path of its implementation,
which is loaded only when a job runs, so compiling a job never imports pyspark.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from engine.errors import ConfigError

T = TypeVar("T")


class UnknownPluginError(ConfigError):
    """A config names a ``type`` no registry entry has."""


@dataclass(frozen=True)
class PluginEntry:
    """A plugin's config class and ``module:Class`` path of its implementation."""

    conf: type[Any]
    impl: str

    def load(self) -> type[Any]:
        module, _, name = self.impl.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


class Registry(Generic[T]):
    """Maps a config ``type`` to its :class:`PluginEntry`."""

    def __init__(self, kind: str, builtins: dict[str, PluginEntry]) -> None:
        self.kind = kind
        self._entries = dict(builtins)
        self._loaded_entry_points = False

    def register(self, name: str, entry: PluginEntry) -> None:
        """Add a plugin in code (entry points are the other way)."""
        self._entries[name] = entry

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._entries)

    def get(self, name: str, *, key: str | None = None, file: str | None = None) -> PluginEntry:
        self._load_entry_points()
        if name in self._entries:
            return self._entries[name]
        close = difflib.get_close_matches(name, self._entries, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        raise UnknownPluginError(
            f"unknown {self.kind} type `{name}`{hint} Known: {', '.join(self.names())}",
            key=key,
            file=file,
        )

    def _load_entry_points(self) -> None:
        if self._loaded_entry_points:
            return
        self._loaded_entry_points = True
        # A third-party entry point names the implementation class; its ``Conf`` attribute is the
        # config class (third-party plugins are imported whole, pyspark included).
        for ep in entry_points(group=f"engine.{self.kind}s"):
            impl = ep.load()
            self._entries.setdefault(ep.name, PluginEntry(conf=impl.Conf, impl=ep.value))
