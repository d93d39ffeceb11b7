"""``lookup`` against a database table on the real PostgreSQL, through a named connection and the
CLI: the records joined as pandas joins them, the table read once a run whatever the number of
work-unit groups (PostgreSQL's own count of scans says so), its password never printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from deltalake import DeltaTable

from engine.errors import ConfigError
from tests.commit.harness import run_here
from tests.helpers import compile_dict, write_jsonl

CUSTOMERS = [(c, f"c{c}", "big" if c % 3 == 0 else "small") for c in range(50)]
ORDERS = [{"id": i, "customer_id": (i * 7) % 60, "amount": float(i)} for i in range(150)]
"""150 orders of customers 0..59; the database knows customers 0..49."""


@pytest.fixture
def customers(postgres: Any, request: pytest.FixtureRequest) -> str:
    name = f"customers_{abs(hash(request.node.name)) % 10**8}"
    rows = ", ".join(f"({c}, '{n}', '{s}')" for c, n, s in CUSTOMERS)
    postgres.psql(
        f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (customer_id BIGINT, name TEXT, segment TEXT);"
        f"INSERT INTO {name} VALUES {rows}"
    )
    return name


def _scans(postgres: Any, table: str) -> int:
    postgres.psql("SELECT pg_stat_force_next_flush()")
    return int(postgres.psql(f"SELECT seq_scan FROM pg_stat_user_tables WHERE relname = '{table}'").strip())


def _job(tmp_path: Path, lookup: dict[str, Any]) -> tuple[Path, Path]:
    """Three datasets of 50 orders in three work-unit groups, each enriched from the database."""
    wh, jobs, inbox = tmp_path / "wh", tmp_path / "jobs", tmp_path / "in"
    for d in "abc":
        write_jsonl(inbox / d / "orders.json", ORDERS[:50] if d != "c" else ORDERS[100:])  # type: ignore[arg-type]
    job = {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(inbox),
                "datasets": "directory",
                "schema": "id BIGINT, customer_id BIGINT, amount DOUBLE",
            }
        },
        "work_units": {"max_groups": 3},
        "converters": [{"type": "lookup", "name": "customer", **lookup}],
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    jobs.mkdir(parents=True)
    (jobs / "enrich.yaml").write_text(yaml.safe_dump(job))
    return jobs, wh


def test_a_database_table_through_a_connection_enriches_records_read_once_a_run(
    postgres: Any, customers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    conns = tmp_path / "connections"
    conns.mkdir()
    login = {"type": "jdbc", "url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    (conns / "shop_db.yaml").write_text(yaml.safe_dump(login))
    monkeypatch.setenv("ENGINE_CONNECTIONS_DIR", str(conns))
    lookup = {"connection": "shop_db", "table": customers, "on": ["customer_id"], "on_missing": "reject"}
    jobs, wh = _job(tmp_path, lookup)
    before = _scans(postgres, customers)
    printed: list[str] = []
    code, summary = run_here(jobs, wh, job="enrich", printed=printed)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert _scans(postgres, customers) - before == 1, "one read of the table for the three groups"
    assert postgres.password not in "\n".join(printed) + json.dumps(summary)

    records = pd.DataFrame(ORDERS[:50] * 2 + ORDERS[100:])
    reference = pd.DataFrame(CUSTOMERS, columns=["customer_id", "name", "segment"])
    want = records.merge(reference, on="customer_id").sort_values(["id", "amount"]).reset_index(drop=True)
    got = DeltaTable(str(wh / "out")).to_pandas()[list(want.columns)].sort_values(["id", "amount"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)
    errors = DeltaTable(str(wh / "_errors" / "enrich")).to_pandas()
    assert len(errors) == len(records) - len(want) > 0
    assert postgres.password not in errors.to_json()
    shown = postgres.jdbc_url.split("?")[0]
    (reason,) = errors.iloc[0]["reasons"]
    assert reason.startswith(f"customer: lookup `customer`: no row of {shown} table {customers}"), reason


def test_a_missing_table_fails_the_run_naming_the_step_and_table(postgres: Any, tmp_path: Path, spark: Any) -> None:
    """A table the database says it does not have is a config error (as a JDBC source's is)."""
    lookup = {"url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password, "table": "no_such"}
    jobs, wh = _job(tmp_path, {**lookup, "on": ["customer_id"]})
    code, summary = run_here(jobs, wh, job="enrich")
    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), summary
    said = summary["message"]  # found while planning: before any DAG reads a record
    assert "cannot read the reference" in said and "(converter `customer`)" in said, said
    assert "key `job.converters[0].table`" in said, said
    assert "An error occurred while calling" not in said
    assert 'relation "no_such" does not exist' in said, said
    assert postgres.password not in json.dumps(summary)
    assert not (wh / "out").exists()


def test_a_reference_read_that_fails_fails_the_run_after_one_attempt(
    postgres: Any, customers: str, tmp_path: Path, spark: Any
) -> None:
    """The query's columns are known at planning (no row is read); reading its rows divides by
    zero. The first group's read fails; the other groups fail with that error, not another read."""
    query = f"SELECT customer_id, name FROM {customers} WHERE 10 / (customer_id - 7) <> 0"
    login = {"url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    jobs, wh = _job(tmp_path, {**login, "query": query, "on": ["customer_id"], "columns": ["name"]})
    store = spark.sparkContext._jsc.sc().statusStore()

    def lookup_jobs() -> set[int]:
        listed = store.jobsList(None)
        return {j.jobId() for j in (listed.apply(i) for i in range(listed.size())) if "lookup.py" in str(j.name())}

    before = lookup_jobs()
    code, summary = run_here(jobs, wh, job="enrich")
    assert (code, summary["status"]) == (1, "FAILED"), summary
    assert "division by zero" in json.dumps(summary), summary
    assert len(lookup_jobs() - before) == 1, "one read of the reference, whatever the groups"
    assert not (wh / "out").exists()


@pytest.mark.parametrize(
    ("lookup", "said"),
    [
        ({"format": "jdbc", "table": "t"}, "needs `url`"),
        ({"url": "jdbc:postgresql://h/db"}, "exactly one of `table` and `query`"),
        ({"url": "jdbc:postgresql://h/db", "table": "t", "query": "SELECT 1"}, "exactly one of `table` and `query`"),
        ({"url": "jdbc:postgresql://h/db", "table": "t", "path": "ref"}, "has no `path`"),
        ({"path": "ref", "table": "t"}, "`table` is for a database reference"),
        ({}, "give the reference's `path`"),
    ],
)
def test_where_a_reference_is_must_be_said_once(tmp_path: Path, lookup: dict[str, Any], said: str) -> None:
    src = write_jsonl(tmp_path / "in" / "orders.json", ORDERS[:5])  # type: ignore[arg-type]
    job = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(src)}},
        "converters": [{"type": "lookup", "on": ["customer_id"], **lookup}],
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    with pytest.raises(ConfigError) as raised:
        compile_dict(job, tmp_path / "wh")
    assert raised.value.key is not None and "converters" in raised.value.key, raised.value
    assert said in str(raised.value), raised.value


def _connected(postgres: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conns = tmp_path / "connections"
    conns.mkdir()
    login = {"type": "jdbc", "url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    (conns / "shop_db.yaml").write_text(yaml.safe_dump(login))
    monkeypatch.setenv("ENGINE_CONNECTIONS_DIR", str(conns))


def test_validate_reads_nothing_of_the_table(
    postgres: Any, customers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    _connected(postgres, tmp_path, monkeypatch)
    jobs, wh = _job(tmp_path, {"connection": "shop_db", "table": customers, "on": ["customer_id"]})
    before = _scans(postgres, customers)
    code, summary = run_here(jobs, wh, "mode=validate", job="enrich")
    assert code == 0, summary
    assert _scans(postgres, customers) == before
    assert not (wh / "out").exists()


def test_a_key_the_table_repeats_fails_a_later_run_whose_groups_first_use_it(
    postgres: Any, customers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    """The second run skips the chain check (it passed before): its three groups, two at a time,
    are the first to use the reference. One of them reads it; none joins a half-made one."""
    _connected(postgres, tmp_path, monkeypatch)
    jobs, wh = _job(tmp_path, {"connection": "shop_db", "table": customers, "on": ["customer_id"]})
    code, summary = run_here(jobs, wh, job="enrich")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    published = DeltaTable(str(wh / "out")).version()
    postgres.psql(f"INSERT INTO {customers} VALUES (7, 'again', 'x')")
    for d in "abc":
        write_jsonl(tmp_path / "in" / d / "more.json", ORDERS[:20])  # type: ignore[arg-type]
    before = _scans(postgres, customers)
    code, summary = run_here(jobs, wh, job="enrich")
    assert (code, summary["status"]) == (1, "FAILED"), summary
    assert "(customer_id) = (7) matches 2 rows of the reference" in json.dumps(summary), summary
    assert _scans(postgres, customers) - before == 1, "read once, counted over the run's cache"
    assert DeltaTable(str(wh / "out")).version() == published
