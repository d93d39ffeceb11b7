"""A local metadata table is created by writing its first Delta commit (no Spark work): Spark and
delta-rs must both read and append to it, and creators racing each other must end with one table."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from engine.state.delta_create import VERSION_PROPERTY, first_commit
from engine.state.delta_table import MetaTable, RustMetaTable

DDL = "job STRING, n BIGINT, at TIMESTAMP"


def test_a_created_table_is_plain_delta_to_spark_and_delta_rs(spark: Any, lake: Path) -> None:
    path = str(lake / "t")
    table = RustMetaTable(spark, path, DDL, version=3, what="test").ensure({"engine.epoch": "abc"})
    assert table.properties == {VERSION_PROPERTY: "3", "engine.epoch": "abc"}
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail["properties"] == {VERSION_PROPERTY: "3", "engine.epoch": "abc"}
    assert spark.read.format("delta").load(path).schema.simpleString() == "struct<job:string,n:bigint,at:timestamp>"

    table.append([{"job": "a", "n": 1, "at": None}])  # delta-rs
    MetaTable(spark, path, DDL, version=3, what="test").append([{"job": "b", "n": 2, "at": None}])  # Spark
    assert sorted(DeltaTable(path).to_pyarrow_table().column("job").to_pylist()) == ["a", "b"]
    assert sorted(r["job"] for r in spark.read.format("delta").load(path).collect()) == ["a", "b"]


def test_racing_creators_make_one_table_and_all_check_the_winners(spark: Any, lake: Path) -> None:
    path = str(lake / "t")
    schema = MetaTable(spark, path, DDL, version=1, what="test").schema.json()

    def create(i: int) -> bool:
        return first_commit(path, schema, {VERSION_PROPERTY: "1", "who": str(i)})

    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(create, range(8)))
    assert won.count(True) == 1
    log = sorted(p.name for p in (lake / "t" / "_delta_log").iterdir())
    assert log == ["00000000000000000000.crc", "00000000000000000000.json"]  # and no temporary file left
    winner = str(won.index(True))
    assert DeltaTable(path).metadata().configuration["who"] == winner
    lines = [json.loads(line) for line in (lake / "t" / "_delta_log" / log[1]).read_text().splitlines()]
    assert [next(iter(a)) for a in lines] == ["commitInfo", "protocol", "metaData"]
    checksum = json.loads((lake / "t" / "_delta_log" / log[0]).read_text())
    assert checksum["metadata"] == lines[2]["metaData"]  # the winner's, not a loser's
    again = RustMetaTable(spark, path, DDL, version=1, what="test").ensure({"who": "late"})
    assert again.properties["who"] == winner


def test_a_newer_schema_version_is_still_refused(spark: Any, lake: Path) -> None:
    import pytest

    from engine.errors import ConfigError

    path = str(lake / "t")
    RustMetaTable(spark, path, DDL, version=5, what="test").ensure()
    with pytest.raises(ConfigError, match="newer engine"):
        RustMetaTable(spark, path, DDL, version=4, what="test").ensure()


def test_the_metadata_schemas_parse_in_python_as_spark_parses_them(spark: Any) -> None:
    """The flat DDLs skip Spark's parser (a JVM round trip); the schema must be the one Spark builds."""
    from pyspark.sql.types import StructType

    from engine.sinks.error_table import ERROR_TABLE_DDL
    from engine.state import delta_runs, delta_store
    from engine.state.delta_table import _schema

    ddls = [v for k, v in vars(delta_store).items() if k.endswith("_DDL")] + [delta_runs._DDL, ERROR_TABLE_DDL, DDL]
    assert len(ddls) >= 10
    for ddl in ddls:
        assert _schema(ddl) == StructType.fromDDL(ddl), ddl
    assert _schema("a ARRAY<STRING>, m MAP<STRING, INT>") == StructType.fromDDL("a ARRAY<STRING>, m MAP<STRING, INT>")


def test_delta_takes_the_created_table_s_checksum_and_derives_the_next_without_spark_jobs(
    spark: Any, lake: Path
) -> None:
    """Commit 0 comes with its checksum, as Delta writes one for an empty table: Delta's snapshot
    takes it, and Spark's first append derives the next checksum from it instead of rebuilding
    the table's state with Spark jobs (as it does when the checksum is missing)."""
    jvm = spark.sparkContext._jvm

    def created(name: str) -> str:
        path = str(lake / name)
        RustMetaTable(spark, path, DDL, version=1, what="test").ensure()
        return path

    def append_jobs(path: str) -> int:
        tracker = spark.sparkContext.statusTracker()
        spark.sparkContext.setJobGroup(f"append-{Path(path).name}", "test")
        try:
            spark.createDataFrame([("a", 1, None)], DDL).write.format("delta").mode("append").save(path)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        return len(tracker.getJobIdsForGroup(f"append-{Path(path).name}"))

    with_crc, without = created("with"), created("without")
    (lake / "without" / "_delta_log" / "00000000000000000000.crc").unlink()
    snapshot = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, with_crc).unsafeVolatileSnapshot()
    assert snapshot.version() == 0 and snapshot.checksumOpt().isDefined()
    assert snapshot.checksumOpt().get().numFiles() == 0
    assert append_jobs(with_crc) < append_jobs(without)
    derived = json.loads((lake / "with" / "_delta_log" / "00000000000000000001.crc").read_text())
    assert derived["numFiles"] == 1
    assert DeltaTable(with_crc).to_pyarrow_table().num_rows == 1  # delta-rs reads it too
