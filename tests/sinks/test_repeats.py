"""A batch's rows that repeat a key, for the sinks that hold one row per key (issue 58, item 1):
a Delta ``merge`` (new table and existing one), ``apply_changes`` (per key and sequence) and a
JDBC ``upsert``, under each ``duplicates`` rule. Tables read with delta-rs and psql, not Spark."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from engine.state.store import InMemoryMetadataStore
from tests.helpers import compile_dict, run_with, write_jsonl

SCHEMA = "id INT, name STRING, v INT"
_names = itertools.count()


def job(inputs: Path, *, datasets: str = "single", **sink: Any) -> dict[str, Any]:
    return {
        "sources": {
            "in": {"type": "files", "format": "json", "path": str(inputs), "schema": SCHEMA, "datasets": datasets}
        },
        "sinks": {
            "lake": {"type": "delta", "path": "lake", "mode": "merge", "keys": ["id"], **sink},
            "all": {"type": "parquet", "path": "all"},
        },
        "publish": {"policy": "partial"},
    }


def table(path: Path) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: (r["id"], str(r)))


def errors(lake: Path) -> list[tuple[str, list[str]]]:
    found = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    return sorted((r["step"], r["reasons"]) for r in found)


def parquet_ids(path: Path) -> list[int]:
    import pyarrow.parquet as pq

    return sorted(pq.read_table(path).column("id").to_pylist())


def test_a_merge_into_a_new_table_rejects_a_key_whose_rows_differ(spark: Any, lake: Path, tmp_path: Path) -> None:
    rows = [{"id": 1, "name": "a", "v": 1}, {"id": 1, "name": "b", "v": 2}, {"id": 2, "name": "c", "v": 3}]
    write_jsonl(tmp_path / "in" / "a.json", rows)  # type: ignore[arg-type]
    result = run_with(spark, job(tmp_path / "in"), lake, InMemoryMetadataStore(), run=1)
    summary = result.summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 2)
    assert table(lake / "lake") == [{"id": 2, "name": "c", "v": 3}]
    reason = (
        "sinks.lake: sink `lake`: key (id) = (1) has 2 records in this batch that are not all alike, and a merge "
        'keeps one row per key: none is kept (choose one with duplicates = "last_by <column>")'
    )
    assert errors(lake) == [("sinks.lake", [reason])] * 2
    assert parquet_ids(lake / "all") == [2], "a rejected record leaves every branch: it is in the error table"


def test_exact_repeats_of_a_row_are_one_row(spark: Any, lake: Path, tmp_path: Path) -> None:
    same = {"id": 1, "name": "a", "v": 1}
    write_jsonl(tmp_path / "in" / "a.json", [same, same, {"id": 2, "name": "c", "v": 3}])  # type: ignore[list-item]
    summary = run_with(spark, job(tmp_path / "in"), lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 0)
    assert summary["sinks"] == {"t.lake": 2, "t.all": 3}, "what each sink wrote"
    assert [r["id"] for r in table(lake / "lake")] == [1, 2]
    assert parquet_ids(lake / "all") == [1, 1, 2], "the append sink takes every record"


def test_a_merge_into_an_existing_table_publishes_each_key_once(spark: Any, lake: Path, tmp_path: Path) -> None:
    """A repeated new key was inserted twice; a repeated existing key failed the MERGE at publish,
    and every rerun failed it again (item 6). Both are rejected now, before staging."""
    store = InMemoryMetadataStore()
    write_jsonl(tmp_path / "in" / "a.json", [{"id": 1, "name": "a", "v": 1}])  # type: ignore[list-item]
    run_with(spark, job(tmp_path / "in"), lake, store, run=1)
    second = [
        {"id": 1, "name": "x", "v": 2},  # an existing key, twice
        {"id": 1, "name": "y", "v": 3},
        {"id": 5, "name": "p", "v": 1},  # a new key, twice
        {"id": 5, "name": "q", "v": 2},
        {"id": 6, "name": "r", "v": 1},
    ]
    write_jsonl(tmp_path / "in" / "b.json", second)  # type: ignore[arg-type]
    summary = run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 4), summary
    assert table(lake / "lake") == [{"id": 1, "name": "a", "v": 1}, {"id": 6, "name": "r", "v": 1}]
    assert DeltaTable(str(lake / "lake")).version() == 1, "one commit a run, none failed"


def test_last_by_keeps_the_greatest_row_of_each_key(spark: Any, lake: Path, tmp_path: Path) -> None:
    rows = [{"id": 1, "name": "a", "v": 1}, {"id": 1, "name": "b", "v": 3}, {"id": 1, "name": "c", "v": 2}]
    write_jsonl(tmp_path / "in" / "a.json", rows)  # type: ignore[arg-type]
    spec = job(tmp_path / "in", duplicates="last_by v")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 0)
    assert table(lake / "lake") == [{"id": 1, "name": "b", "v": 3}]
    assert parquet_ids(lake / "all") == [1, 1, 1]


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        pytest.param(
            "last_by v",
            "sink `lake`: key (id) = (1) has 2 rows in this batch that are not all alike with the greatest (v)",
            id="last-by-tie",
        ),
        pytest.param(
            "fail",
            "sink `lake`: key (id) = (1) has 2 rows in this batch that are not all alike (duplicates = fail)",
            id="fail",
        ),
    ],
)
def test_a_rule_that_cannot_choose_fails_the_batch_and_publishes_nothing(
    spark: Any, lake: Path, tmp_path: Path, rule: str, says: str
) -> None:
    rows = [{"id": 1, "name": "a", "v": 2}, {"id": 1, "name": "b", "v": 2}, {"id": 2, "name": "c", "v": 1}]
    write_jsonl(tmp_path / "in" / "a.json", rows)  # type: ignore[arg-type]
    store = InMemoryMetadataStore()
    summary = run_with(spark, job(tmp_path / "in", duplicates=rule), lake, store, run=1).summary()
    assert summary["status"] == "FAILED", summary
    assert says in summary["dags"][0]["message"]
    assert not (lake / "lake" / "_delta_log").exists() and not (lake / "all").exists()
    again = run_with(spark, job(tmp_path / "in", duplicates=rule), lake, store, run=2).summary()
    assert again["status"] == "FAILED" and says in again["dags"][0]["message"], "the same range, the same answer"


def test_a_key_in_two_datasets_of_one_batch_fails_it(spark: Any, lake: Path, tmp_path: Path) -> None:
    """``reject`` judges each dataset's records apart: neither dataset's row is the wrong one."""
    write_jsonl(tmp_path / "in" / "d1" / "a.json", [{"id": 1, "name": "a", "v": 1}])  # type: ignore[list-item]
    write_jsonl(tmp_path / "in" / "d2" / "a.json", [{"id": 1, "name": "b", "v": 2}])  # type: ignore[list-item]
    spec = job(tmp_path / "in" / "*", datasets="directory")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert summary["status"] == "FAILED", summary
    assert (
        "key (id) = (1) has 2 rows in this batch that are not all alike, read from different datasets"
        in summary["dags"][0]["message"]
    )
    assert not (lake / "lake" / "_delta_log").exists()


def test_apply_changes_rejects_events_of_one_key_and_sequence_that_differ(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    events = [
        {"id": 1, "name": "a", "v": 1},
        {"id": 1, "name": "b", "v": 2},  # id 1 at v 2: two different events
        {"id": 1, "name": "c", "v": 2},
        {"id": 2, "name": "d", "v": 1},
        {"id": 2, "name": "d", "v": 1},  # delivered twice: one event
    ]
    write_jsonl(tmp_path / "in" / "a.json", events)  # type: ignore[arg-type]
    spec = job(tmp_path / "in", mode="apply_changes", sequence_by="v")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 2)
    assert table(lake / "lake") == [{"id": 1, "name": "a", "v": 1}, {"id": 2, "name": "d", "v": 1}]
    assert {r[1][0].split(": ", 1)[1].split(" has")[0] for r in errors(lake)} == {"sink `lake`: key (id, v) = (1, 2)"}


@pytest.mark.parametrize(
    ("sink", "key", "says"),
    [
        pytest.param(
            {"mode": "append", "keys": [], "duplicates": "fail"}, "job.sinks.lake", "only used with mode", id="append"
        ),
        pytest.param({"duplicates": "newest"}, "job.sinks.lake.duplicates", "not `newest`", id="unknown-rule"),
        pytest.param({"duplicates": "last_by"}, "job.sinks.lake.duplicates", "`last_by <column>`", id="no-column"),
        pytest.param(
            {"duplicates": "last_by updated"}, "job.sinks.lake.duplicates", "orders by `updated`", id="missing-column"
        ),
    ],
)
def test_rule_mistakes_are_config_errors_naming_the_key(
    spark: Any, lake: Path, tmp_path: Path, sink: dict[str, Any], key: str, says: str
) -> None:
    write_jsonl(tmp_path / "in" / "a.json", [{"id": 1, "name": "a", "v": 1}])  # type: ignore[list-item]
    with pytest.raises(ConfigError) as failed:
        run_with(spark, job(tmp_path / "in", **sink), lake, InMemoryMetadataStore(), run=1)
    assert failed.value.key == key and says in str(failed.value), str(failed.value)
    assert not (lake / "lake").exists()


def test_the_default_rule_is_reject() -> None:
    (dag,) = compile_dict(job(Path("/in")), Path("/lake")).dags
    lake = next(s for s in dag.sinks if s.name == "lake")
    per = lake.conf.one_row_per()
    assert per is not None and (per.columns, str(per.rule)) == (["id"], "reject")


# -- the JDBC upsert -------------------------------------------------------------------------


def rows(postgres: Any, sql: str) -> list[tuple[str, ...]]:
    return [tuple(line.split("|")) for line in postgres.psql(sql).splitlines() if line]


def upsert_job(inputs: Path, postgres: Any, table: str, **sink: Any) -> dict[str, Any]:
    db = {
        "type": "jdbc",
        "url": postgres.jdbc_url,
        "user": postgres.user,
        "password": postgres.password,
        "table": table,
        "mode": "upsert",
        "keys": ["id"],
        **sink,
    }
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(inputs), "schema": SCHEMA}},
        "sinks": {"db": db},
    }


@pytest.mark.parametrize(
    ("sink", "kept", "rejected"),
    [
        pytest.param({}, [("2", "c", "3")], 2, id="reject"),
        pytest.param({"duplicates": "last_by v"}, [("1", "b", "2"), ("2", "c", "3")], 0, id="last-by"),
        pytest.param({"sequence_by": "v"}, [("1", "b", "2"), ("2", "c", "3")], 0, id="sequence-by"),
    ],
)
def test_a_jdbc_upsert_holds_each_key_once(
    spark: Any, lake: Path, tmp_path: Path, postgres: Any, sink: dict[str, Any], kept: list[Any], rejected: int
) -> None:
    """Without ``sequence_by`` a repeated key's row was an arbitrary one of them."""
    name = f"repeats_{next(_names)}"
    postgres.psql(f"CREATE TABLE {name} (id INT PRIMARY KEY, name TEXT, v INT)")
    rows_in = [{"id": 1, "name": "a", "v": 1}, {"id": 1, "name": "b", "v": 2}, {"id": 2, "name": "c", "v": 3}]
    write_jsonl(tmp_path / "in" / "a.json", rows_in)  # type: ignore[arg-type]
    summary = run_with(spark, upsert_job(tmp_path / "in", postgres, name, **sink), lake, InMemoryMetadataStore(), run=1)
    assert (summary.summary()["status"], summary.summary()["errors"]) == ("SUCCEEDED", rejected)
    assert rows(postgres, f"SELECT id, name, v FROM {name} ORDER BY id") == kept
