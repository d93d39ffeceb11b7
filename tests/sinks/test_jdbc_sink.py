"""The JDBC sink against a real PostgreSQL: append, overwrite and upsert, each batch applied in one
transaction with its batch id in the control table, and a driver killed anywhere in publishing
leaving, after the rerun, every row exactly once. Checked with ``psql``, not Spark."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with, write_jsonl

_names = itertools.count()


@pytest.fixture
def table(postgres: Any) -> str:
    name = f"customers_{next(_names)}"
    postgres.psql(f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, name TEXT, version INT)")
    return name


def rows(postgres: Any, sql: str) -> list[tuple[str, ...]]:
    return [tuple(line.split("|")) for line in postgres.psql(sql).splitlines() if line]


def sink(postgres: Any, table: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "jdbc",
        "url": postgres.jdbc_url,
        "user": postgres.user,
        "password": postgres.password,
        "table": table,
        **extra,
    }


def job(path: Path, sinks: dict[str, Any]) -> dict[str, Any]:
    return {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(path),
                "schema": "id BIGINT, name STRING, version INT",
            }
        },
        "sinks": sinks,
    }


def people(lo: int, hi: int, version: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"p{i}-v{version}", "version": version} for i in range(lo, hi)]


def test_upsert_updates_matching_keys_and_records_each_batch(
    spark: Any, lake: Path, tmp_path: Path, postgres: Any, table: str
) -> None:
    store = InMemoryMetadataStore()
    spec = job(tmp_path / "in", {"db": sink(postgres, table, mode="upsert", keys=["id"], sequence_by="version")})
    write_jsonl(tmp_path / "in" / "a.json", people(0, 50, 1))
    run_with(spark, spec, lake, store, run=1)
    # the next file repeats ids 40..49 twice within one batch: the larger version wins
    write_jsonl(tmp_path / "in" / "b.json", [*people(40, 80, 3), *people(40, 50, 2)])
    second = run_with(spark, spec, lake, store, run=2)
    assert second.summary()["status"] == "SUCCEEDED"
    assert rows(postgres, f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {table}") == [
        ("80", "80", "0", "79")
    ]
    assert rows(postgres, f"SELECT version, count(*) FROM {table} GROUP BY version ORDER BY 1") == [
        ("1", "40"),
        ("3", "40"),
    ]
    assert rows(postgres, f"SELECT batch, row_count FROM engine_batches WHERE target = '{table}' ORDER BY batch") == [
        ("1", "50"),
        ("2", "40"),
    ]
    assert rows(postgres, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'engine_stage_%'") == [("0",)]


def test_append_and_overwrite(spark: Any, lake: Path, tmp_path: Path, postgres: Any) -> None:
    names = [f"log_{next(_names)}", f"latest_{next(_names)}"]
    for name in names:
        postgres.psql(f"CREATE TABLE {name} (id BIGINT, name TEXT, version INT)")
    store = InMemoryMetadataStore()
    spec = job(
        tmp_path / "in",
        {"log": sink(postgres, names[0]), "latest": sink(postgres, names[1], mode="overwrite")},
    )
    write_jsonl(tmp_path / "in" / "a.json", people(0, 30, 1))
    run_with(spark, spec, lake, store, run=1)
    write_jsonl(tmp_path / "in" / "b.json", people(30, 40, 1))
    run_with(spark, spec, lake, store, run=2)
    assert rows(postgres, f"SELECT count(*), count(DISTINCT id) FROM {names[0]}") == [("40", "40")]
    assert rows(postgres, f"SELECT count(*), min(id), max(id) FROM {names[1]}") == [("10", "30", "39")]


def test_mistakes_are_config_errors_and_write_nothing(
    spark: Any, lake: Path, tmp_path: Path, postgres: Any, table: str
) -> None:
    write_jsonl(tmp_path / "in" / "a.json", people(0, 5, 1))
    cases = [
        (sink(postgres, "no_such_table"), "job.sinks.db.table", "there is no table no_such_table"),
        (sink(postgres, table, mode="upsert", keys=["nope"]), "job.sinks.db.keys", "nope not in the branch"),
    ]
    for conf, key, text in cases:
        with pytest.raises(ConfigError) as failed:
            run_with(spark, job(tmp_path / "in", {"db": conf}), lake, InMemoryMetadataStore(), run=1)
        assert failed.value.key == key and text in str(failed.value)
    narrow = f"narrow_{next(_names)}"
    postgres.psql(f"CREATE TABLE {narrow} (id BIGINT)")
    with pytest.raises(ConfigError, match=r"has no column\(s\) name, version"):
        run_with(spark, job(tmp_path / "in", {"db": sink(postgres, narrow)}), lake, InMemoryMetadataStore(), run=1)
    with pytest.raises(ConfigError, match="mode `upsert` needs `keys`"):
        run_with(
            spark,
            job(tmp_path / "in", {"db": sink(postgres, table, mode="upsert")}),
            lake,
            InMemoryMetadataStore(),
            run=1,
        )
    assert rows(postgres, f"SELECT count(*) FROM {table}") == [("0",)]


# The job's sequence: 1 publish into the append table, 2 drop its staging, 3 publish into the
# upsert table, 4 drop its staging, 5 log the files read, 6 set the watermark. mid_step:n stops a
# publish inside its transaction (the control row inserted, not committed).
POINTS = ["after_staging", "mid_step:1", "after_step:1", "mid_step:3", "after_step:4"]


@pytest.mark.crash
@pytest.mark.parametrize("point", POINTS)
def test_a_killed_publish_then_reruns_leave_every_row_once(
    spark: Any, tmp_path: Path, postgres: Any, point: str
) -> None:
    import yaml

    from tests.commit.harness import crash_run, run_here

    n = next(_names)
    appended, upserted = f"events_{n}", f"state_{n}"
    postgres.psql(
        f"CREATE TABLE {appended} (id BIGINT, name TEXT, version INT); "
        f"CREATE TABLE {upserted} (id BIGINT PRIMARY KEY, name TEXT, version INT)"
    )
    wh, jobs, inputs = tmp_path / "wh", tmp_path / "jobs", tmp_path / "in"
    spec = job(
        inputs,
        {
            "a_log": sink(postgres, appended),
            "b_state": sink(postgres, upserted, mode="upsert", keys=["id"], sequence_by="version"),
        },
    )
    jobs.mkdir()
    (jobs / "crash.yaml").write_text(yaml.safe_dump(spec))
    write_jsonl(inputs / "a.json", people(0, 60, 1))

    crashed = crash_run(jobs, wh, kill_at=point)
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    write_jsonl(inputs / "b.json", people(50, 70, 2))  # arrives while the job is down

    for _ in range(2):  # the rerun repairs the crashed batch; the next reads what is left
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert rows(postgres, f"SELECT count(*), count(DISTINCT (id, version)) FROM {appended}") == [("80", "80")]
    assert rows(postgres, f"SELECT count(*), min(id), max(id), sum(version) FROM {upserted}") == [
        ("70", "0", "69", str(50 + 20 * 2))
    ]
    batches = rows(
        postgres,
        f"SELECT target, count(*) FROM engine_batches WHERE target IN ('{appended}', '{upserted}') "
        "GROUP BY 1 ORDER BY 1",
    )
    assert batches == [(appended, "2"), (upserted, "2")]
    assert rows(postgres, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'engine_stage_%'") == [("0",)]


def test_an_upsert_needs_a_unique_index_on_its_keys_and_a_table_name_is_checked(
    spark: Any, lake: Path, tmp_path: Path, postgres: Any
) -> None:
    plain = f"plain_{next(_names)}"
    postgres.psql(f"CREATE TABLE {plain} (id BIGINT, name TEXT, version INT)")
    write_jsonl(tmp_path / "in" / "a.json", people(0, 5, 1))
    spec = job(tmp_path / "in", {"db": sink(postgres, plain, mode="upsert", keys=["id"])})
    with pytest.raises(ConfigError, match=r"needs a unique index \(or primary key\) on exactly \(id\)") as failed:
        run_with(spark, spec, lake, InMemoryMetadataStore(), run=1)
    assert failed.value.key == "job.sinks.db.keys"
    with pytest.raises(ConfigError, match="is not a table name") as bad:
        run_with(
            spark, job(tmp_path / "in", {"db": sink(postgres, "t; DROP TABLE x")}), lake, InMemoryMetadataStore(), run=1
        )
    assert bad.value.key == "job.sinks.db.table"
