"""The sink ABC."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from engine.sinks.conf import SinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.commit.batch import BatchRef, Staged
    from engine.storage.hadoop import HadoopFs


class Sink(ABC):
    """Writes one branch. ``check()`` runs before anything is written. ``stage()`` writes the
    branch where no reader sees it yet and returns the commit steps that publish it."""

    Conf: ClassVar[type[SinkConf]]
    counts_while_staging: ClassVar[bool] = False
    """Whether :meth:`stage` reads its whole branch in one Spark action that writes it (not a
    ``show`` of its first rows): a run may then count its records while this sink stages them,
    and :meth:`discard` what it staged if its branch turns out empty or the read fails."""

    def __init__(self, conf: SinkConf, *, name: str, key: str) -> None:
        self.conf = conf
        self.name = name
        self.key = key

    def check(self, df: DataFrame) -> None:
        """Raise :class:`~engine.errors.ConfigError` if ``df`` cannot be written as configured."""

    @abstractmethod
    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged: ...

    def locations(self, dag: str) -> dict[str, object]:
        """What its commit steps (in DAG ``dag``) need that they may not store (a login), by the key
        the steps look it up under: the publisher hands it to them. Nothing by default."""
        return {}

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        """Throw away, unpublished, whatever :meth:`stage` of ``batch`` wrote (nothing by default)."""

    @abstractmethod
    def write(self, df: DataFrame) -> None:
        """Write ``df`` straight to the destination, outside the publish protocol."""
