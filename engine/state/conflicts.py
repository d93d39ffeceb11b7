"""Which errors are worth retrying: the engine's own say so (``EngineError.transient``); foreign
ones (Delta through py4j, delta-rs) are classified here, and only here. And which failures of a
publish no retry can mend (:func:`is_deterministic`): those quarantine a batch at once.

A Delta commit conflict reaches Python as an exception whose class is Delta's (``delta.exceptions``
converts some), a ``Py4JJavaError`` or an ``AnalysisException`` naming the Java class or Delta's
error class in its text, or delta-rs's ``CommitFailedError``: so a foreign exception is a conflict
when its class name or its text names one. A retry never loses or doubles a row: the failed commit
wrote nothing, and metadata tables only grow.
"""

from __future__ import annotations

import re

from engine.causes import chain, sqlstates
from engine.errors import EngineError

__all__ = ["CONFLICT_CLASSES", "CONFLICT_CODES", "DETERMINISTIC_STATES", "is_deterministic", "is_transient"]

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


DETERMINISTIC_STATES = ("21", "22", "23", "42")
"""SQLSTATE classes of a statement the data or the table refuses, the same each time it runs:
cardinality violations (a MERGE source row matching a target row twice), data exceptions (a value
that does not cast, an overflow), integrity constraint violations (a CHECK or NOT NULL constraint,
a unique key) and syntax or access-rule violations (a column or table the statement names that is
not there, a schema that does not fit)."""


def is_deterministic(exc: BaseException) -> bool:
    """Whether ``exc`` is one that doing the same again, with the same data and the same table,
    must meet again: an error of its chain of causes (:func:`engine.causes.chain`, Python's and
    Java's) carries a SQLSTATE of :data:`DETERMINISTIC_STATES` (Spark's and Delta's error classes,
    a database driver's ``SQLException``). A conflict (:func:`is_transient`) never is; nor is an
    error that says no such SQLSTATE (an I/O error, a lost connection), which a retry may not meet."""
    if any(is_transient(e) for e in chain(exc) if isinstance(e, BaseException)):
        return False
    states = sqlstates(exc)
    if any(state in MAY_PASS for state in states):
        return False
    return any(state[:2] in DETERMINISTIC_STATES for state in states)


MAY_PASS = ("42K03", "23505", "23000")
"""SQLSTATEs of those classes that another writer can cause and a retry may not meet: a path not
found (a VACUUM or a concurrent overwrite removed a file the plan read), a unique key violated
(a MERGE on a database racing another writer's insert of the key: ``23505`` in PostgreSQL,
``23000`` in SQL Server, Oracle and MySQL, which give every integrity violation that one state, so
it is retried as before rather than quarantined at once)."""
