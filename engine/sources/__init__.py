"""Sources: where a JobDag's records come from."""

from engine.plugins import PluginEntry, Registry
from engine.sources.conf import FilesSourceConf

SOURCES: Registry[object] = Registry(
    "source",
    {"files": PluginEntry(FilesSourceConf, "engine.sources.files:FilesSource")},
)

__all__ = ["SOURCES", "FilesSourceConf"]
