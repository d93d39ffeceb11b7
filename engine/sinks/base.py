"""The sink ABC."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from engine.sinks.conf import SinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Sink(ABC):
    """Writes one branch. ``check()`` runs before anything is written; ``write()`` writes."""

    Conf: ClassVar[type[SinkConf]]

    def __init__(self, conf: SinkConf, *, name: str, key: str) -> None:
        self.conf = conf
        self.name = name
        self.key = key

    def check(self, df: DataFrame) -> None:
        """Raise :class:`~engine.errors.ConfigError` if ``df`` cannot be written as configured."""

    def write(self, df: DataFrame) -> None:
        self._write(df)

    @abstractmethod
    def _write(self, df: DataFrame) -> None: ...
