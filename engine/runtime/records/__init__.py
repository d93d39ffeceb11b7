"""The records DAG (:class:`RecordsDag`): one source's records through converters and forks into
sinks, in small pieces: its parts, planning, reading (or reading while staging), staging and
publishing, each a module of this package."""

from engine.runtime.records.dag import RecordsDag
from engine.runtime.records.parts import scratch_of
from engine.runtime.records.reading import union_groups
from engine.runtime.records.results import RecordsPlan, RecordsResult

__all__ = ["RecordsDag", "RecordsPlan", "RecordsResult", "scratch_of", "union_groups"]
