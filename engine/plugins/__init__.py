"""Registries of plugins keyed by the config ``type`` field."""

from engine.plugins.conf import PluginConf
from engine.plugins.registry import PluginEntry, Registry, UnknownPluginError

__all__ = ["PluginConf", "PluginEntry", "Registry", "UnknownPluginError"]
