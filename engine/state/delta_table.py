"""A small Delta table of the engine's metadata (``<warehouse>/_engine/...``): created once with
its schema version, refused if a newer engine wrote it, appended to in one commit per call.

Metadata tables are append-only: appends never conflict in Delta, so many DAGs and many jobs can
share one metadata location. Readers pick the newest row per key.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from delta.tables import DeltaTable
from pyspark.sql.types import StructType

from engine.errors import ConfigError, EngineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VERSION_PROPERTY = "engine.schema_version"
log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentWriteException",
    "FileAlreadyExistsException",
    "DELTA_CONCURRENT",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
    "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",  # another job is creating the same table right now
)
"""Conflicts another writer's commit can cause; the write is retried (the table only grows, so
a retry never loses or doubles a row: the failed commit wrote nothing)."""


def retry_conflicts(action: Callable[[], T], *, what: str, attempts: int = 8, any_error: bool = False) -> T:
    """Run ``action``, retrying Delta's transient concurrency conflicts with jittered backoff
    (``any_error``: every error, for idempotent actions such as creating or inspecting a table
    another job may be creating at this very moment)."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            transient = (any_error and not isinstance(exc, EngineError)) or any(name in text for name in TRANSIENT)
            if attempt == attempts or not transient:
                raise
            delay = min(5.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.5)
            log.info("%s: concurrent commit conflict (%s); retrying in %.1fs", what, type(exc).__name__, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


class MetaTable:
    """One metadata table at ``path`` with the columns of ``ddl``, written by schema ``version``."""

    def __init__(self, spark: SparkSession, path: str, ddl: str, *, version: int, what: str) -> None:
        self.spark = spark
        self.path = path
        schema = StructType.fromDDL(ddl)
        assert isinstance(schema, StructType)
        self.schema = schema
        self.version = version
        self.what = what
        self._checked = False
        self.properties: dict[str, str] = {}
        """The table's properties, once :meth:`check` has read them."""

    def ensure(self, properties: dict[str, str] | None = None) -> MetaTable:
        """Create the table if missing (with ``properties`` if this call creates it) and check its
        schema version. Another job creating it at the same moment is a retried conflict."""

        def create() -> None:
            builder = (
                DeltaTable.createIfNotExists(self.spark)
                .location(self.path)
                .addColumns(self.schema)
                .property(VERSION_PROPERTY, str(self.version))
            )
            for key, value in (properties or {}).items():
                builder = builder.property(key, value)
            builder.execute()

        def create_and_check() -> MetaTable:
            create()
            self._checked = False
            return self.check()

        return retry_conflicts(create_and_check, what=f"creating the {self.what} table", any_error=True)

    def exists(self) -> bool:
        return self._checked or bool(DeltaTable.isDeltaTable(self.spark, self.path))

    def check(self) -> MetaTable:
        """Refuse a table written by a newer schema version (a metadata read, no Spark job; once
        per process: a table's schema version does not change under a running job)."""
        if self._checked:
            return self
        self.properties = retry_conflicts(
            lambda: table_properties(self.spark, self.path),
            what=f"reading the {self.what} table",
            attempts=4,
            any_error=True,
        )
        found = int(self.properties[VERSION_PROPERTY]) if VERSION_PROPERTY in self.properties else None
        if found is not None and found > self.version:
            raise ConfigError(
                f"the {self.what} table was written by a newer engine (schema version {found} > {self.version}); "
                "upgrade the engine or point `warehouse` elsewhere",
                file=self.path,
            )
        self._checked = True
        return self

    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        """Append ``rows`` (dicts by column name) in one commit."""
        names = self.schema.fieldNames()
        tuples = [tuple(r[n] for n in names) for r in rows]
        if tuples:
            frame = self.spark.createDataFrame(tuples, schema=self.schema)
            retry_conflicts(
                lambda: frame.write.format("delta").mode("append").save(self.path), what=f"appending to {self.what}"
            )
        return len(tuples)

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """A Delta table's properties (a metadata read, no Spark job)."""
    quoted = path.replace("`", "``")
    return {row["key"]: row["value"] for row in spark.sql(f"SHOW TBLPROPERTIES delta.`{quoted}`").collect()}
