"""The Delta source: version ranges, compaction in between, row changes refused or read from the
change data feed, and a table that went backwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError, JobFailedError
from engine.state.store import InMemoryMetadataStore
from engine.state.watermarks import LongWatermark
from tests.helpers import delta_ids, run_with


def append(spark: Any, path: Path, lo: int, hi: int, *, files: int = 1) -> None:
    frame = spark.range(lo, hi, numPartitions=files).selectExpr("id", "concat('r', id) AS v")
    frame.write.format("delta").mode("append").save(str(path))


def job(table: Path, **source: Any) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "delta", "path": str(table), **source}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }


def test_three_runs_read_each_version_once_even_across_a_compaction(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    append(spark, table, 0, 10)
    first = run_with(spark, job(table), lake, store, run=1)
    append(spark, table, 10, 20, files=3)
    append(spark, table, 20, 25)
    spark.sql(f"OPTIMIZE delta.`{table}`")  # rewrites the files just added, before the run reads them
    second = run_with(spark, job(table), lake, store, run=2)
    append(spark, table, 25, 40, files=2)
    third = run_with(spark, job(table), lake, store, run=3)
    fourth = run_with(spark, job(table), lake, store, run=4)
    reads = [r.summary()["records_read"] for r in (first, second, third, fourth)]
    assert sum(reads) == 40 and reads[0] == 10 and reads[-1] == 0
    assert delta_ids(lake / "out") == list(range(40))
    (state,) = store.load_state("t", "t").values()
    assert state.watermark == LongWatermark(DeltaTable(str(table)).version())


def test_throttling_stops_at_a_version_boundary(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    append(spark, table, 0, 1)
    run_with(spark, job(table), lake, store, run=1)
    for lo in range(1, 31, 10):
        append(spark, table, lo, lo + 10)
    spec = job(table, limits={"max_records": 15})
    reads = [run_with(spark, spec, lake, store, run=n).summary()["records_read"] for n in range(2, 6)]
    assert reads == [10, 10, 10, 0]  # one version (10 rows) fits; a second would exceed 15
    assert delta_ids(lake / "out") == list(range(31))


def test_row_changes_are_refused_in_append_mode(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    append(spark, table, 0, 10)
    run_with(spark, job(table), lake, store, run=1)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id < 3")
    with pytest.raises(JobFailedError, match=r"version 1 .*DELETE.* updates or deletes rows"):
        run_with(spark, job(table), lake, store, run=2)
    (state,) = store.load_state("t", "t").values()
    assert state.watermark == LongWatermark(0)
    assert delta_ids(lake / "out") == list(range(10))  # only the first run's rows


def test_the_change_data_feed_carries_updates_and_deletes(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    spark.sql(
        f"CREATE TABLE delta.`{table}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    append(spark, table, 0, 5)
    spec = job(table, changes="cdf")
    run_with(spark, spec, lake, store, run=1)
    spark.sql(f"UPDATE delta.`{table}` SET v = 'changed' WHERE id = 1")
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 2")
    append(spark, table, 5, 7)
    second = run_with(spark, spec, lake, store, run=2)
    assert second.summary()["records_read"] == 4
    rows = DeltaTable(str(lake / "out")).to_pyarrow_table().to_pylist()
    changes = sorted((r["id"], r["_change_type"], r["v"]) for r in rows if r["_commit_version"] > 1)
    assert changes == [
        (1, "update_postimage", "changed"),
        (2, "delete", "r2"),
        (5, "insert", "r5"),
        (6, "insert", "r6"),
    ]
    assert sorted(r["id"] for r in rows if r["_change_type"] == "insert") == [0, 1, 2, 3, 4, 5, 6]


def test_cdf_mode_on_a_table_without_it_is_a_config_error(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    append(spark, table, 0, 2)
    with pytest.raises(ConfigError, match="change data feed is off"):
        run_with(spark, job(table, changes="cdf"), lake, InMemoryMetadataStore(), run=1)
    assert not (lake / "out").exists()


def test_a_table_that_went_backwards_is_an_error_not_a_silent_skip(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    append(spark, table, 0, 3)
    append(spark, table, 3, 6)
    run_with(spark, job(table), lake, store, run=1)
    import shutil

    shutil.rmtree(table)  # recreated: version 0 again, below the watermark 1
    append(spark, table, 100, 101)
    with pytest.raises(JobFailedError, match="went backwards"):
        run_with(spark, job(table), lake, store, run=2)
    assert delta_ids(lake / "out") == list(range(6))


def test_a_version_backfill_has_its_own_bookkeeping(spark: Any, lake: Path) -> None:
    table = lake.parent / "bronze"
    store = InMemoryMetadataStore()
    for lo in range(0, 30, 10):
        append(spark, table, lo, lo + 10)  # versions 0, 1, 2
    run_with(spark, job(table), lake, store, run=1)
    live = store.load_state("t", "t")
    replay = job(table, **{"from": "1", "to": "1"})
    replay["sinks"] = {"out": {"type": "delta", "path": "replay"}}
    assert run_with(spark, replay, lake, store, run=2).summary()["records_read"] == 10
    assert run_with(spark, replay, lake, store, run=3).summary()["records_read"] == 0
    assert delta_ids(lake / "replay") == list(range(10, 20))
    assert store.load_state("t", "t") == live
