"""Sinks: where a branch's records are written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.plugins import PluginEntry, Registry
from engine.sinks.conf import (
    ConsoleSinkConf,
    DeltaSinkConf,
    FilesSinkConf,
    JdbcSinkConf,
    KafkaSinkConf,
    SinkConf,
    TableSinkConf,
)

if TYPE_CHECKING:
    from engine.sinks.base import Sink

_FILES: PluginEntry[SinkConf, Sink] = PluginEntry(FilesSinkConf, "engine.sinks.files:FilesSink")
SINKS: Registry[SinkConf, Sink] = Registry(
    "sink",
    {
        "delta": PluginEntry(DeltaSinkConf, "engine.sinks.delta:DeltaSink"),
        **{name: _FILES for name in ("parquet", "avro", "json", "csv")},
        "console": PluginEntry(ConsoleSinkConf, "engine.sinks.console:ConsoleSink"),
        "jdbc": PluginEntry(JdbcSinkConf, "engine.sinks.jdbc:JdbcSink"),
        "kafka": PluginEntry(KafkaSinkConf, "engine.sinks.kafka:KafkaSink"),
    },
)

__all__ = [
    "SINKS",
    "ConsoleSinkConf",
    "DeltaSinkConf",
    "FilesSinkConf",
    "JdbcSinkConf",
    "KafkaSinkConf",
    "SinkConf",
    "TableSinkConf",
]
