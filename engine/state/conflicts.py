"""Which errors are worth retrying: the engine's own say so (``EngineError.transient``); foreign
ones (Delta through py4j, delta-rs) are classified here, and only here.

A Delta commit conflict reaches Python as an exception whose class is Delta's (``delta.exceptions``
converts some), a ``Py4JJavaError`` or an ``AnalysisException`` naming the Java class or Delta's
error class in its text, or delta-rs's ``CommitFailedError``: so a foreign exception is a conflict
when its class name or its text names one. A retry never loses or doubles a row: the failed commit
wrote nothing, and metadata tables only grow.
"""

from __future__ import annotations

import re

from engine.errors import EngineError

__all__ = ["CONFLICT_CLASSES", "CONFLICT_CODES", "is_transient"]

CONFLICT_CLASSES = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentWriteException",
    "FileAlreadyExistsException",  # Hadoop: another writer created the same log entry first
    "CommitFailedError",  # delta-rs: its own retries of a concurrent commit ran out
)
"""Exception classes (Python or Java) of conflicts another writer's commit can cause."""
CONFLICT_CODES = (
    "DELTA_CONCURRENT",  # every DELTA_CONCURRENT_* error class
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
    "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",  # another job is creating the same table right now
)
"""Delta's error classes (``[DELTA_...]`` in a message) of the same conflicts."""

_CONFLICT = re.compile("|".join(map(re.escape, CONFLICT_CLASSES + CONFLICT_CODES)))
"""Anywhere in the text: Delta's internal classes wrap the names (``DeltaConcurrentAppendException``)."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may not happen again if the action that raised it is retried as it is."""
    if isinstance(exc, EngineError):
        return exc.transient
    return _CONFLICT.search(f"{type(exc).__name__}: {exc}") is not None
