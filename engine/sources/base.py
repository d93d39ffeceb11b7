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

from engine.plugins.ddl import declared_columns
from engine.sources.conf import SourceConf
from engine.sources.workunits import Budget, WorkUnit
from engine.state.store import LIVE, DatasetState, FileKey, PinnedSchema, backfill_scope
from engine.state.watermarks import Watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

CORRUPT_RECORD = "_corrupt_record"
"""A column a source may add holding the raw text of a record it could not parse."""
CORRUPT_REASON = "_corrupt_reason"
"""A column a source may add saying why its corrupt record did not fit (the ``read`` step's reason)."""


@dataclass(frozen=True)
class PlanContext:
    """What a run asks of a source's work-unit calculator."""

    state: dict[str, DatasetState]
    """The stored state of this source's datasets (in this run's scope), by URN."""
    per_dataset: Budget
    per_run: Budget
    now: datetime
    """When the DAG plans (naive UTC): every "how long ago" is measured from it."""
    guarantee: bool = True
    """Whether the first dataset may exceed ``per_run`` by one item (so a run always progresses)."""
    files_read: Callable[[], dict[str, set[FileKey]]] = dict
    """The file log of this source's datasets (in this run's scope), by URN: read when called."""
    pinned_schema: Callable[[], PinnedSchema | None] = lambda: None
    """The schema this DAG's source pinned in an earlier run (read when called)."""
    pin_schema: Callable[[str, str], None] = lambda fingerprint, ddl: None
    """Keep ``(fingerprint, ddl)`` as this DAG's source schema for the runs after this one."""
    checked_chain: Callable[[], str | None] = lambda: None
    """The key of the newest check of this DAG's chain that passed (read when called)."""
    chain_passed: Callable[[str], None] = lambda key: None
    """Keep ``key`` as this DAG's newest passed chain check."""

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
    Payloads: ClassVar[tuple[type, ...]] = ()
    """The dataclasses this source's work units carry, for an entry-point plugin to register (a
    stored plan decodes only registered classes); built-ins list theirs in their registry entry."""
    conf: SourceConf

    def __init__(self, conf: SourceConf, *, name: str, key: str, schema_ddl: str | None) -> None:
        self.conf = conf
        self.name = name
        self.key = key
        self.schema_ddl = schema_ddl
        self.scratch: str | None = None
        """A folder of the DAG's own under the warehouse where a read may keep what it copies
        (the new bytes of a file appended to); the runtime sets it, and empties it once the batch
        is published. ``None``: there is none (nothing is copied)."""
        self.scratch_used = False
        """Whether a read of this run copied something into :attr:`scratch`."""

    def declared_schema(self) -> StructType | None:
        """The schema the config declares (``schema_ddl``), parsed by Spark on the driver (no job);
        ``None`` when it is inferred. A :class:`ConfigError` naming ``<source>.schema`` when
        Spark's parser refuses it."""
        if self.schema_ddl is None:
            return None
        return declared_columns(self.schema_ddl, what=f"source `{self.name}`", key=f"{self.key}.schema")

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
    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        """The schema every group is read with (``units=None``: validation, read nothing);
        ``None`` when it cannot be known (nothing to read and nothing declared). ``ctx`` (when
        planning a run) lets a source keep an inferred schema for the runs after this one."""

    @abstractmethod
    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        """The records of ``units``, lazily, with their dataset URN in ``DATASET``."""

    def skip_unreadable(self, error: BaseException, units: list[WorkUnit]) -> bool:
        """A read of ``units`` failed with ``error``. A source told to skip what it cannot read
        takes what ``error`` names out of ``units`` (and records it) and returns ``True``: read
        them again. ``False``: the read fails."""
        return False

    def read_hint(self, error: BaseException) -> str:
        """What to add to the message of a read that failed with ``error``: how to get past it."""
        return ""

    def actual_high(self, unit: WorkUnit) -> Watermark | None:
        """Where a unit that read successfully stopped (by default, where it meant to)."""
        return unit.high

    def files_read(self, unit: WorkUnit) -> list[LoggedFile]:
        """What a unit that committed adds to the file log: the files it read (sources whose
        items are files; the others keep everything in their watermark)."""
        return []


LoggedFile = tuple[str, int, int, str]
"""A file for the file log: (path, modification time in ms, size, note: empty when read)."""
