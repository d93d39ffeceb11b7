"""One registry per plugin kind, keyed by the config ``type``.

Built-ins are listed explicitly (a ``--py-files`` zip carries no entry-point metadata); third
parties add theirs through the ``engine.<kind>`` entry-point group. An entry holds the plugin's
config class (pure pydantic, importable without a JVM) and the import path of its implementation,
which is loaded only when a job runs, so compiling a job never imports pyspark.

A registry is typed by its kind's config base and implementation base
(``Registry[SourceConf, Source]``), so what it hands out needs no cast.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from engine.plugins.conf import PluginConf
from engine.plugins.errors import UnknownPluginError
from engine.plugins.payloads import PAYLOADS

ConfT = TypeVar("ConfT", bound=PluginConf)
ImplT = TypeVar("ImplT")


@dataclass(frozen=True)
class PluginEntry(Generic[ConfT, ImplT]):
    """A plugin's config class, the ``module:Class`` path of its implementation, and the
    ``module:Class`` paths of the payload dataclasses its work units carry (a stored batch plan
    names them; see :mod:`engine.plugins.payloads`)."""

    conf: type[ConfT]
    impl: str
    payloads: tuple[str, ...] = ()

    def load(self) -> type[ImplT]:
        module, _, name = self.impl.partition(":")
        found: type[ImplT] = getattr(importlib.import_module(module), name)
        return found


class Registry(Generic[ConfT, ImplT]):
    """Maps a config ``type`` to its :class:`PluginEntry`."""

    def __init__(self, kind: str, builtins: dict[str, PluginEntry[ConfT, ImplT]]) -> None:
        self.kind = kind
        self._entries: dict[str, PluginEntry[ConfT, ImplT]] = {}
        self._loaded_entry_points = False
        for name, entry in builtins.items():
            self.register(name, entry)

    def register(self, name: str, entry: PluginEntry[ConfT, ImplT]) -> None:
        """Add a plugin in code (entry points are the other way)."""
        self._entries[name] = entry
        for path in entry.payloads:
            PAYLOADS.register(path)

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._entries)

    def get(self, name: str, *, key: str | None = None, file: str | None = None) -> PluginEntry[ConfT, ImplT]:
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
        # config class and its ``Payloads`` the dataclasses its work units carry (third-party
        # plugins are imported whole, pyspark included).
        for ep in entry_points(group=f"engine.{self.kind}s"):
            impl = ep.load()
            if ep.name in self._entries:
                continue
            payloads = tuple(f"{c.__module__}:{c.__qualname__}" for c in getattr(impl, "Payloads", ()))
            self.register(ep.name, PluginEntry(conf=impl.Conf, impl=ep.value, payloads=payloads))
