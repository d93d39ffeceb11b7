"""Sinks: where a branch's records are written."""

from engine.plugins import PluginEntry, Registry
from engine.sinks.conf import ConsoleSinkConf, SinkConf, TableSinkConf

_TABLE = PluginEntry(TableSinkConf, "engine.sinks.table:TableSink")
SINKS: Registry[object] = Registry(
    "sink",
    {
        **{name: _TABLE for name in ("delta", "parquet", "avro", "json", "csv")},
        "console": PluginEntry(ConsoleSinkConf, "engine.sinks.console:ConsoleSink"),
    },
)

__all__ = ["SINKS", "ConsoleSinkConf", "SinkConf", "TableSinkConf"]
