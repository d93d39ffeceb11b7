"""Registries of plugins keyed by the config ``type``, and the payload classes plans may name."""

from engine.plugins.conf import Anchors, PluginConf
from engine.plugins.errors import UnknownPayloadError, UnknownPluginError
from engine.plugins.payloads import PAYLOADS, PayloadClasses
from engine.plugins.registry import PluginEntry, Registry

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
