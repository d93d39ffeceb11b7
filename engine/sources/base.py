"""The source ABC: plan work units from the stored state, then read them.

A source names its datasets (URNs) and proposes one :class:`WorkUnit` per dataset from each
dataset's stored watermark (:meth:`Source.plan`), empty units included so no watermark is lost.
:meth:`Source.read` reads a group of units as one DataFrame carrying each record's dataset URN in
:data:`~engine.converters.frame.DATASET`; :meth:`Source.schema` fixes the schema once for the
run, so every group reads with the same one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from engine.sources.conf import SourceConf
from engine.sources.workunits import Budget, WorkUnit
from engine.state.store import LIVE, DatasetState, FileKey, backfill_scope
from engine.state.watermarks import Watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

CORRUPT_RECORD = "_corrupt_record"
"""A column a source may add holding the raw text of a record it could not parse."""


@dataclass(frozen=True)
class PlanContext:
    """What a run asks of a source's work-unit calculator."""

    state: dict[str, DatasetState]
    """The stored state of this source's datasets (in this run's scope), by URN."""
    per_dataset: Budget
    per_run: Budget
    now: datetime
    """The run's start (naive UTC): every "how long ago" is measured from it."""
    guarantee: bool = True
    """Whether the first dataset may exceed ``per_run`` by one item (so a run always progresses)."""
    files_read: Callable[[], dict[str, set[FileKey]]] = dict
    """The file log of this source's datasets (in this run's scope), by URN: read when called."""

    def low(self, dataset: str) -> Watermark | None:
        found = self.state.get(dataset)
        return found.watermark if found else None

    def rank(self, dataset: str) -> tuple[int, datetime]:
        """Least recently committed first (never-committed datasets before all)."""
        found = self.state.get(dataset)
        return (1, found.committed_at) if found else (0, datetime.min)


class Source(ABC):
    """Reads a JobDag's records. Subclasses implement :meth:`plan`, :meth:`schema` and :meth:`read`."""

    Conf: ClassVar[type[SourceConf]]
    conf: SourceConf

    def __init__(self, conf: SourceConf, *, name: str, key: str, schema_ddl: str | None) -> None:
        self.conf = conf
        self.name = name
        self.key = key
        self.schema_ddl = schema_ddl

    @property
    def scope(self) -> str:
        """Whose bookkeeping this run uses: ``live``, or its backfill range's own."""
        return backfill_scope(self.conf.from_, self.conf.to) if self.conf.backfill else LIVE

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        """Raise :class:`~engine.errors.ConfigError` if the input is missing (no Spark job).
        ``not_yet``: input paths an upstream DAG writes, which need not exist yet (nor be probed);
        the other paths, and what does not depend on any input, are checked all the same."""

    @abstractmethod
    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        """One work unit per known dataset (empty ones carry their watermark)."""

    @abstractmethod
    def schema(self, spark: SparkSession, units: list[WorkUnit] | None) -> StructType | None:
        """The schema every group is read with (``units=None``: validation, read nothing);
        ``None`` when it cannot be known (nothing to read and nothing declared)."""

    @abstractmethod
    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        """The records of ``units``, lazily, with their dataset URN in ``DATASET``."""

    def actual_high(self, unit: WorkUnit) -> Watermark | None:
        """Where a unit that read successfully stopped (by default, where it meant to)."""
        return unit.high

    def files_read(self, unit: WorkUnit) -> list[LoggedFile]:
        """What a unit that committed adds to the file log: the files it read (sources whose
        items are files; the others keep everything in their watermark)."""
        return []


LoggedFile = tuple[str, int, int, str]
"""A file for the file log: (path, modification time in ms, size, note: empty when read)."""
