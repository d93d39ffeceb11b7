"""Sources: where a JobDag's records come from."""

from engine.plugins import PluginEntry, Registry
from engine.sources.conf import DeltaSourceConf, FilesSourceConf, JdbcSourceConf

SOURCES: Registry[object] = Registry(
    "source",
    {
        "files": PluginEntry(FilesSourceConf, "engine.sources.files:FilesSource"),
        "delta": PluginEntry(DeltaSourceConf, "engine.sources.delta:DeltaSource"),
        "jdbc": PluginEntry(JdbcSourceConf, "engine.sources.jdbc:JdbcSource"),
    },
)

__all__ = ["SOURCES", "DeltaSourceConf", "FilesSourceConf", "JdbcSourceConf"]
