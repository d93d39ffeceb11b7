"""Sources: where a JobDag's records come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.plugins import PAYLOADS, PluginEntry, Registry
from engine.sources.conf import DeltaSourceConf, FilesSourceConf, JdbcSourceConf, KafkaSourceConf, SourceConf

if TYPE_CHECKING:
    from engine.sources.base import Source

SOURCES: Registry[SourceConf, Source] = Registry(
    "source",
    {
        "files": PluginEntry(
            FilesSourceConf, "engine.sources.files:FilesSource", payloads=("engine.sources.file_listing:FileEntry",)
        ),
        "delta": PluginEntry(
            DeltaSourceConf, "engine.sources.delta:DeltaSource", payloads=("engine.sources.delta:Range",)
        ),
        "jdbc": PluginEntry(JdbcSourceConf, "engine.sources.jdbc:JdbcSource"),
        "kafka": PluginEntry(
            KafkaSourceConf, "engine.sources.kafka:KafkaSource", payloads=("engine.sources.kafka:Offsets",)
        ),
    },
)

# Every work unit is stored with its size; plans written before the files source was split name
# its listed file under the module it had then.
for _framework in ("engine.sources.workunits:WorkUnit", "engine.sources.workunits:Size"):
    PAYLOADS.register(_framework)
PAYLOADS.register("engine.sources.file_listing:FileEntry", formerly=("engine.sources.files:FileEntry",))

__all__ = ["SOURCES", "DeltaSourceConf", "FilesSourceConf", "JdbcSourceConf", "KafkaSourceConf", "SourceConf"]
