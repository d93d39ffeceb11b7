"""A small Delta table of the engine's metadata (``<warehouse>/_engine/...``): created once with
its schema version, refused if a newer engine wrote it, appended to in one commit per call.

Metadata tables are append-only: appends never conflict in Delta, so many DAGs and many jobs can
share one metadata location. Readers pick the newest row per key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from delta.tables import DeltaTable
from pyspark.sql.types import StructType

from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VERSION_PROPERTY = "engine.schema_version"


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

    def ensure(self) -> MetaTable:
        """Create the table if missing (call before any concurrency) and check its schema version."""
        (
            DeltaTable.createIfNotExists(self.spark)
            .location(self.path)
            .addColumns(self.schema)
            .property(VERSION_PROPERTY, str(self.version))
            .execute()
        )
        return self.check()

    def exists(self) -> bool:
        return self._checked or bool(DeltaTable.isDeltaTable(self.spark, self.path))

    def check(self) -> MetaTable:
        """Refuse a table written by a newer schema version (a metadata read, no Spark job; once
        per process: a table's schema version does not change under a running job)."""
        if self._checked:
            return self
        found = stored_version(self.spark, self.path)
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
            frame.write.format("delta").mode("append").save(self.path)
        return len(tuples)

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)


def stored_version(spark: SparkSession, path: str) -> int | None:
    """The table's ``engine.schema_version`` property (a metadata read, no Spark job)."""
    quoted = path.replace("`", "``")
    for row in spark.sql(f"SHOW TBLPROPERTIES delta.`{quoted}`").collect():
        if row["key"] == VERSION_PROPERTY:
            return int(row["value"])
    return None
