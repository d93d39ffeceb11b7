"""The classes a stored batch plan may name, so decoding a plan never imports what it is told to.

A plan (``engine.commit.plan_codec``) stores each work unit's payload dataclasses by
``module:Class``. Decoding rebuilds only the classes registered here: the built-in sources'
(listed with their registry entries, as import paths, so registering imports nothing), and an
entry-point plugin's own (its implementation's ``Payloads``, registered when the entry point is
loaded). A class that moved keeps the name older plans stored it under (``formerly``).
"""

from __future__ import annotations

import importlib
from typing import Any

from engine.plugins.errors import UnknownPayloadError


class PayloadClasses:
    """The registered payload classes by the ``module:Class`` name a plan stores."""

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}
        self._stored: dict[str, str] = {}

    def register(self, path: str, *, formerly: tuple[str, ...] = ()) -> None:
        """Allow the class at ``path`` (``module:Class``), also under the names in ``formerly``.
        New plans store a moved class under its oldest name, so an engine rolled back to a
        version from before the move still reads the plans this one wrote. Registering ``path``
        again (a plugin that reuses a built-in's payload) keeps the former name it has."""
        for name in (path, *formerly):
            self._paths[name] = path
        if formerly:
            self._stored[path] = formerly[0]
        else:
            self._stored.setdefault(path, path)

    def stored_as(self, path: str) -> str:
        """The name a plan stores the class at ``path`` under."""
        return self._stored.get(path, path)

    def register_class(self, cls: type) -> None:
        self.register(f"{cls.__module__}:{cls.__qualname__}")

    def names(self) -> list[str]:
        return sorted(self._paths)

    def resolve(self, name: str) -> type[Any]:
        """The class a plan names; :class:`UnknownPayloadError` for one no plugin registered."""
        path = self._paths.get(name)
        if path is None:
            raise UnknownPayloadError(
                f"a batch plan names class {name}, which no plugin registered as a work-unit payload"
            )
        module, _, qualname = path.partition(":")
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        if not isinstance(found, type):
            raise UnknownPayloadError(f"a batch plan names {name}, which is not a class")
        return found


PAYLOADS = PayloadClasses()
"""The one registry of payload classes (the plugin registries add to it)."""
