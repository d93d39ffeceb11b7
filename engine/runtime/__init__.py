"""Session factory, JobManager and the DAGs it runs.

Imported lazily: the CLI uses this package's pyspark-free parts (``stop``, ``progress``) before
Spark is needed, and compiling or validating a config must not pay for importing pyspark.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.runtime.dag import Dag, DagResult
    from engine.runtime.jobmanager import JobManager, JobResult
    from engine.runtime.records import RecordsDag
    from engine.runtime.session import build_session, cached_class_path, cached_jars

_WHERE = {
    "Dag": "engine.runtime.dag",
    "DagResult": "engine.runtime.dag",
    "JobManager": "engine.runtime.jobmanager",
    "JobResult": "engine.runtime.jobmanager",
    "RecordsDag": "engine.runtime.records",
    "build_session": "engine.runtime.session",
    "cached_class_path": "engine.runtime.session",
    "cached_jars": "engine.runtime.session",
}
__all__ = [
    "Dag",
    "DagResult",
    "JobManager",
    "JobResult",
    "RecordsDag",
    "build_session",
    "cached_class_path",
    "cached_jars",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
