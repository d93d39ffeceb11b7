"""Session factory, JobManager and JobDag."""

from engine.runtime.jobdag import DagResult, JobDag
from engine.runtime.jobmanager import JobManager, JobResult
from engine.runtime.session import build_session, cached_jars

__all__ = ["DagResult", "JobDag", "JobManager", "JobResult", "build_session", "cached_jars"]
