"""Registries of plugins keyed by the config ``type``, and the payload classes plans may name."""

from engine.plugins.conf import Anchors, PluginConf
from engine.plugins.payloads import PAYLOADS, PayloadClasses, UnknownPayloadError
from engine.plugins.registry import PluginEntry, Registry, UnknownPluginError

__all__ = [
    "PAYLOADS",
    "Anchors",
    "PayloadClasses",
    "PluginConf",
    "PluginEntry",
    "Registry",
    "UnknownPayloadError",
    "UnknownPluginError",
]
