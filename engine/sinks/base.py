"""The sink ABC."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from engine.sinks.conf import SinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.commit.batch import BatchRef, Staged
    from engine.commit.fs import HadoopFs


class Sink(ABC):
    """Writes one branch. ``check()`` runs before anything is written. ``stage()`` writes the
    branch where no reader sees it yet and returns the commit steps that publish it."""

    Conf: ClassVar[type[SinkConf]]

    def __init__(self, conf: SinkConf, *, name: str, key: str) -> None:
        self.conf = conf
        self.name = name
        self.key = key

    def check(self, df: DataFrame) -> None:
        """Raise :class:`~engine.errors.ConfigError` if ``df`` cannot be written as configured."""

    @abstractmethod
    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged: ...

    @abstractmethod
    def write(self, df: DataFrame) -> None:
        """Write ``df`` straight to the destination, outside the publish protocol."""
