"""The error table's record ids: what tells two rejected records apart, and a batch adding only
the ids the table does not hold. Read back with delta-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from engine.commit.delta_files import read_listed
from engine.sinks.error_table import (
    ORIGIN,
    RECORD_ID,
    SCHEMA_VERSION,
    ErrorTable,
    held_scope,
    record_id,
    with_record_ids,
)
from engine.state.delta_table import MetaTable, never_written
from tests.sqllog import SqlLog

V1_DDL = (
    "job STRING, dag STRING, run_id STRING, source STRING, step STRING, reasons ARRAY<STRING>, "
    "record STRING, error_time TIMESTAMP"
)
ROW = ("j", "d", "r1", "in", "check", ["check: negative"], '{"id":7}')


def _ids(spark: Any, rows: list[tuple[str, str, str]]) -> list[str]:
    """The record ids of rejected ``(dataset, file, record)`` rows, in input order."""
    frame = spark.createDataFrame(
        [(i, *r) for i, r in enumerate(rows)], "n INT, dataset STRING, file STRING, record STRING"
    )
    place = [F.lit("job"), F.lit("dag"), F.lit("in"), F.col("dataset"), F.col("file")]
    digest = record_id(place, F.col("record"), F.array(F.lit("check: negative")))
    return [r[RECORD_ID] for r in with_record_ids(frame, digest).orderBy("n").collect()]


@pytest.mark.parametrize(
    ("rows", "distinct"),
    [
        pytest.param([("ds", "f1", "{}"), ("ds", "f2", "{}")], 2, id="same-record-in-two-files"),
        pytest.param([("ds", "f1", "{}"), ("ds2", "f1", "{}")], 2, id="same-record-in-two-datasets"),
        pytest.param([("ds", "f1", "{}"), ("ds", "f1", "{}")], 2, id="same-line-twice-in-one-file"),
        pytest.param([("ds", "", "{}"), ("ds", None, "{}")], 2, id="no-file-and-null-file"),
        pytest.param([("ds", "f1", '{"id":1}'), ("ds", "f1", '{"id":2}')], 2, id="two-records"),
    ],
)
def test_record_ids_tell_apart_records_from_different_places(spark: Any, rows: list[Any], distinct: int) -> None:
    ids = _ids(spark, rows)
    assert len(set(ids)) == distinct
    assert _ids(spark, rows) == ids, "the same rows read again get the same ids"


def test_identical_records_of_one_file_are_numbered(spark: Any) -> None:
    ids = _ids(spark, [("ds", "f1", "{}")] * 3)
    digests = {i.rsplit("-", 1)[0] for i in ids}
    assert len(digests) == 1 and sorted(i.rsplit("-", 1)[1] for i in ids) == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("ddl", "version", "row"),
    [
        pytest.param(V1_DDL, 1, (*ROW, None), id="version-1"),
        pytest.param(f"{V1_DDL}, {RECORD_ID} STRING", 2, (*ROW, None, "a-1"), id="version-2"),
    ],
)
def test_an_older_table_gets_the_columns_it_lacks_and_keeps_its_rows(
    spark: Any, lake: Path, ddl: str, version: int, row: tuple[Any, ...]
) -> None:
    path = str(lake / "_errors" / "j")
    MetaTable(spark, path, ddl, version=version, what="error").ensure()
    spark.createDataFrame([row], ddl).write.format("delta").mode("append").save(path)
    ErrorTable(path).ensure(spark)
    ErrorTable(path).ensure(spark)  # once upgraded, nothing more to do
    table = DeltaTable(path)
    assert table.metadata().configuration["engine.schema_version"] == str(SCHEMA_VERSION)
    rows = table.to_pyarrow_table().to_pylist()
    held = row[8] if version == 2 else None
    assert [(r["record"], r[RECORD_ID], r[ORIGIN]) for r in rows] == [('{"id":7}', held, None)]
    assert table.metadata().configuration["delta.dataSkippingStringPrefixLength"] == "256"


def test_new_rows_leaves_out_the_ids_the_table_holds(spark: Any, lake: Path) -> None:
    path = str(lake / "_errors" / "j")
    errors = ErrorTable(path)
    errors.ensure(spark)
    ddl = f"{V1_DDL}, {RECORD_ID} STRING"
    spark.createDataFrame([(*ROW, None, "a-1"), (*ROW, None, "b-1")], ddl).write.format("delta").mode("append").save(
        path
    )
    batch = spark.createDataFrame([(*ROW, None, "b-1"), (*ROW, None, "b-2"), (*ROW, None, "c-1")], ddl)
    log = SqlLog(spark)
    assert sorted(r[RECORD_ID] for r in errors.new_rows(batch).collect()) == ["b-2", "c-1"]
    # A table of few files is read as the files its checksum lists: no Spark job rebuilds its
    # Delta state (which every run would pay, the table being at a new version each time).
    built = [n.desc for e in log.executions() for n in e.nodes if "Delta Table State" in n.desc]
    assert built == []
    assert read_listed(spark, path) is not None  # (the checksum lists the files: read that way)


def test_a_batch_reads_only_the_held_ids_its_records_could_have(spark: Any, lake: Path) -> None:
    """A record's id digests its job, DAG and origin (its file): the ids held for other DAGs, or
    for files outside the batch's range, are not read (Parquet's statistics skip their files),
    those of rows from before the origin column are."""
    path = str(lake / "_errors" / "j")
    errors = ErrorTable(path)
    errors.ensure(spark)
    ddl = f"{V1_DDL}, {RECORD_ID} STRING, {ORIGIN} STRING"
    a, b = "file:/in/a.json", "file:/in/b.json"

    def row(dag: str, origin: str | None, rid: str) -> tuple[Any, ...]:
        return ("j", dag, "r1", "in", "check", ["check: negative"], "{}", None, rid, origin)

    for held in (
        [row("d", a, "a-1"), row("d", a, "a-2")],
        [row("d", b, "b-1")],
        [row("e", b, "x-1")],
        [row("d", None, "n-1")],
    ):
        errors.append(spark.createDataFrame(held, ddl).coalesce(1))  # a file each, as a batch writes
    batch = spark.createDataFrame([row("d", b, i) for i in ("a-1", "b-1", "x-1", "n-1", "c-1")], ddl)
    log = SqlLog(spark)
    kept = errors.new_rows(batch, held_scope("j", "d", (b, b))).collect()
    # b-1 is held for b; n-1 by a row with no origin. a-1 is held for another file, x-1 for another DAG.
    assert sorted(r[RECORD_ID] for r in kept) == ["a-1", "c-1", "x-1"]
    scans = [n for e in log.executions() for n in e.nodes if n.name.startswith("Scan parquet")]
    assert [int(n.metrics["number of output rows"]) for n in scans] == [2], "read more of the table than b-1, n-1"
    everything = errors.new_rows(batch).collect()  # no scope: every id the table holds
    assert sorted(r[RECORD_ID] for r in everything) == ["c-1"]


def test_the_files_statistics_keep_whole_origins(spark: Any, lake: Path) -> None:
    """Delta would keep 32 characters of a string's least and greatest value per file: paths
    differ further on, and no file of another batch could be skipped."""
    path = str(lake / "_errors" / "j")
    errors = ErrorTable(path)
    errors.ensure(spark)
    origin = "file:/landing/orders/" + "x" * 80 + "/2026-11-29/part-0001.json"
    ddl = f"{V1_DDL}, {RECORD_ID} STRING, {ORIGIN} STRING"
    errors.append(spark.createDataFrame([("j", "d", "r1", "in", "check", [], "{}", None, "a-1", origin)], ddl))
    stats = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()  # an arro3 table
    assert [(a["min.origin"], a["max.origin"]) for a in stats] == [(origin, origin)]


def test_a_table_nothing_was_written_to_is_not_read_for_ids(spark: Any, lake: Path) -> None:
    """While the error table is as the engine created it, staging reads none of it (no Delta
    snapshot, no scan); once anything was appended, the ids it holds are read again."""
    path = str(lake / "_errors" / "j")
    errors = ErrorTable(path)
    errors.ensure(spark)
    assert never_written(path)
    ddl = f"{V1_DDL}, {RECORD_ID} STRING"
    batch = spark.createDataFrame([(*ROW, None, "a-1")], ddl)
    assert errors.new_rows(batch) is batch
    errors.append(batch)
    assert not never_written(path)
    assert errors.new_rows(batch).count() == 0


def test_never_written_is_sure_or_says_no(spark: Any, lake: Path) -> None:
    built = str(lake / "built")  # Spark's table builder (an empty _staged_commits folder beside commit 0)
    MetaTable(spark, built, V1_DDL, version=1, what="error").ensure()
    assert never_written(built)
    assert not never_written(str(lake / "missing"))
    assert not never_written("s3a://bucket/errors")  # not local: unsure, so the table is read
    spark.createDataFrame([(*ROW, None)], V1_DDL).write.format("delta").mode("overwrite").save(str(lake / "ctas"))
    assert not never_written(str(lake / "ctas"))  # created with rows in its commit 0


@pytest.mark.parametrize(
    ("persist", "scoped"), [pytest.param("DISK_ONLY", True, id="persisted"), pytest.param("NONE", False, id="none")]
)
def test_a_run_reads_the_held_ids_of_its_files_range_only_from_a_persisted_frame(
    spark: Any, lake: Path, persist: str, scoped: bool
) -> None:
    """The origins' range is taken by the counting pass; a frame read again by each write
    (``persist = NONE``) might reject other records the second time, so it reads every held id.
    Either way a file rewritten with one more bad line adds that line's record alone."""
    from engine.state.store import InMemoryMetadataStore
    from tests.helpers import json_job, run_with, write_jsonl

    inbox = lake.parent / "in"
    metadata = InMemoryMetadataStore()
    job = json_job(inbox, [{"type": "check", "name": "positive", "expr": "id > 0"}], persist=persist)
    job["sources"]["in"]["schema"] = "id BIGINT"
    write_jsonl(inbox / "a.json", [{"id": 1}, {"id": -1}, "{"])
    assert run_with(spark, job, lake, metadata, run=1).status == "SUCCEEDED"
    # rewritten (its first line longer: its old size no longer ends a line): read again, whole
    write_jsonl(inbox / "a.json", [{"id": 11}, {"id": -1}, "{", {"id": -3}])
    write_jsonl(inbox / "b.json", [{"id": 2}, {"id": -2}, {"id": -2}])
    log = SqlLog(spark)
    assert run_with(spark, job, lake, metadata, run=2).status == "SUCCEEDED"
    rows = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    found = sorted((r["record"], r[ORIGIN].rsplit("/", 1)[1]) for r in rows)
    a, b = "a.json", "b.json"
    assert found == [("{", a), ('{"id":-1}', a), ('{"id":-2}', b), ('{"id":-2}', b), ('{"id":-3}', a)]
    scans = [n.desc for e in log.executions() for n in e.nodes if n.name.startswith("Scan parquet")]
    held = [d.split("DataFilters:", 1)[1].split("Format:", 1)[0] for d in scans if "record_id" in d]
    assert held and all(("origin" in filters) == scoped for filters in held), held
