"""The source ABC."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from engine.plugins import PluginConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CORRUPT_RECORD = "_corrupt_record"
"""A column a source may add holding the raw text of a record it could not parse."""


class Source(ABC):
    """Reads a JobDag's records as a DataFrame.

    ``read()`` is the public template method; subclasses implement ``_read()``. A source that can
    keep unparseable records returns them with their raw text in :data:`CORRUPT_RECORD`.
    """

    Conf: ClassVar[type[PluginConf]]

    def __init__(self, conf: PluginConf, *, name: str, key: str, schema_ddl: str | None) -> None:
        self.conf = conf
        self.name = name
        self.key = key
        self.schema_ddl = schema_ddl

    def read(self, spark: SparkSession) -> DataFrame:
        """The source's records, lazily (nothing is read until an action)."""
        return self._read(spark)

    def check(self, spark: SparkSession) -> None:
        """Raise :class:`~engine.errors.ConfigError` if the input is missing (no Spark job)."""

    @abstractmethod
    def _read(self, spark: SparkSession) -> DataFrame: ...
