"""What every Spark job of one JobDag carries, whichever thread submits it.

PySpark pins each Python thread to a JVM thread, and the scheduler pool, job tags and job group are
that thread's local properties: a DAG's own threads (its work units, its metadata writes) each set
them again, and clear them after, since pool threads are reused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

POOL = "spark.scheduler.pool"


@dataclass(frozen=True)
class DagScope:
    pool: str
    """The FAIR scheduler pool."""
    tag: str
    """The job tag that cancels every Spark job of this DAG at once."""

    @contextmanager
    def entered(self, sc: SparkContext, group: str, description: str) -> Iterator[None]:
        sc.setLocalProperty(POOL, self.pool)
        sc.addJobTag(self.tag)
        sc.setJobGroup(group, description, interruptOnCancel=True)
        try:
            yield
        finally:
            sc.removeJobTag(self.tag)
            sc.setLocalProperty(POOL, None)  # type: ignore[arg-type]

    def cancel(self, sc: SparkContext) -> None:
        sc.cancelJobsWithTag(self.tag)


def scope_for(run_id: str, dag: str, pool: str) -> DagScope:
    return DagScope(pool=pool, tag=f"engine:{run_id}:{dag}")
