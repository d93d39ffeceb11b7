"""The errors of the plugin registries: a config naming a ``type`` nobody registered, and a stored
batch plan naming a payload class nobody registered."""

from __future__ import annotations

from engine.errors import ConfigError, EngineError

__all__ = ["UnknownPayloadError", "UnknownPluginError"]


class UnknownPluginError(ConfigError):
    """A config names a ``type`` no registry entry has."""


class UnknownPayloadError(EngineError, ValueError):
    """A stored plan names a class no plugin registered (the plugin that planned it is gone, or the
    plan did not come from this engine). The run fails; the batch stays in the commit log."""
