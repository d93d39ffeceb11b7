"""The JDBC source against a real PostgreSQL: an id or timestamp column as the watermark, parallel
range reads, throttling, and the column mistakes that must be clear errors."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError, JobFailedError
from engine.state.store import LIVE, DatasetState, InMemoryMetadataStore, utcnow
from engine.state.watermarks import LongWatermark, TimestampWatermark
from tests.helpers import delta_ids, run_with

_names = itertools.count()


@pytest.fixture
def table(postgres: Any) -> str:
    name = f"orders_{next(_names)}"
    postgres.psql(f"CREATE TABLE {name} (id BIGINT, amount NUMERIC(10,2), updated_at TIMESTAMP, note TEXT)")
    return name


def insert(postgres: Any, table: str, lo: int, hi: int, *, day: int = 1) -> None:
    postgres.psql(
        f"INSERT INTO {table} SELECT g, g * 1.5, TIMESTAMP '2026-11-{day:02d} 00:00:00' + g * INTERVAL '1 second', "
        f"'n' || g FROM generate_series({lo}, {hi - 1}) g"
    )


def job(postgres: Any, table: str, **source: Any) -> dict[str, Any]:
    return {
        "sources": {
            "db": {
                "type": "jdbc",
                "url": postgres.jdbc_url,
                "table": table,
                "user": postgres.user,
                "password": postgres.password,
                "incremental": {"column": "id"},
                "partitions": 3,
                **source,
            }
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }


def test_three_runs_read_each_row_once_in_parallel_ranges(spark: Any, lake: Path, postgres: Any, table: str) -> None:
    store = InMemoryMetadataStore()
    insert(postgres, table, 0, 100)
    postgres.psql(f"INSERT INTO {table} (id, note) VALUES (NULL, 'no id')")  # never read, logged
    first = run_with(spark, job(postgres, table), lake, store, run=1)
    insert(postgres, table, 100, 130)
    second = run_with(spark, job(postgres, table), lake, store, run=2)
    insert(postgres, table, 130, 200)
    third = run_with(spark, job(postgres, table), lake, store, run=3)
    idle = run_with(spark, job(postgres, table), lake, store, run=4)
    assert [r.summary()["records_read"] for r in (first, second, third, idle)] == [100, 30, 70, 0]
    assert delta_ids(lake / "out") == list(range(200))
    (state,) = store.load_state("t", "t").values()
    assert state.watermark == LongWatermark(199)


def test_a_timestamp_column_throttled_by_records(spark: Any, lake: Path, postgres: Any, table: str) -> None:
    store = InMemoryMetadataStore()
    insert(postgres, table, 0, 50)
    spec = job(postgres, table, incremental={"column": "updated_at"}, limits={"max_records": 20})
    reads = [run_with(spark, spec, lake, store, run=n).summary()["records_read"] for n in range(1, 5)]
    assert reads == [20, 20, 10, 0]
    assert delta_ids(lake / "out") == list(range(50))
    (state,) = store.load_state("t", "t").values()
    assert isinstance(state.watermark, TimestampWatermark)
    assert state.watermark.value.isoformat() == "2026-11-01T00:00:49"


def test_a_backfill_reads_its_range_without_moving_the_live_watermark(
    spark: Any, lake: Path, postgres: Any, table: str
) -> None:
    store = InMemoryMetadataStore()
    insert(postgres, table, 0, 40)
    run_with(spark, job(postgres, table), lake, store, run=1)
    live = store.load_state("t", "t")
    spec = job(postgres, table, **{"from": "10", "to": "19"})
    spec["sinks"] = {"out": {"type": "delta", "path": "replay"}}
    assert run_with(spark, spec, lake, store, run=2).summary()["records_read"] == 10
    assert run_with(spark, spec, lake, store, run=3).summary()["records_read"] == 0
    assert delta_ids(lake / "replay") == list(range(10, 20))
    assert store.load_state("t", "t") == live


def test_a_missing_or_unusable_column_is_a_config_error(spark: Any, lake: Path, postgres: Any, table: str) -> None:
    insert(postgres, table, 0, 5)
    with pytest.raises(ConfigError, match="`order_id` is not in") as missing:
        run_with(spark, job(postgres, table, incremental={"column": "order_id"}), lake, InMemoryMetadataStore(), run=1)
    assert missing.value.key == "job.sources.db.incremental.column"
    with pytest.raises(ConfigError, match="must be an integer or a timestamp"):
        run_with(spark, job(postgres, table, incremental={"column": "note"}), lake, InMemoryMetadataStore(), run=1)
    assert not (lake / "out").exists()


def test_a_type_change_of_the_column_is_refused(spark: Any, lake: Path, postgres: Any, table: str) -> None:
    store = InMemoryMetadataStore()
    insert(postgres, table, 0, 5)
    run_with(spark, job(postgres, table, incremental={"column": "updated_at"}), lake, store, run=1)
    postgres.psql(
        f"ALTER TABLE {table} ALTER COLUMN updated_at TYPE BIGINT USING extract(epoch FROM updated_at)::bigint"
    )
    with pytest.raises(ConfigError, match="its type changed"):
        run_with(spark, job(postgres, table, incremental={"column": "updated_at"}), lake, store, run=2)
    assert delta_ids(lake / "out") == list(range(5))  # nothing more written


def test_a_source_that_went_backwards_is_an_error(spark: Any, lake: Path, postgres: Any, table: str) -> None:
    store = InMemoryMetadataStore()
    url = job(postgres, table)["sources"]["db"]["url"]
    dataset = f"jdbc:{url}/{table}"
    store.save_state([DatasetState("t", "t", LIVE, dataset, LongWatermark(10_000), "r0", utcnow())])
    insert(postgres, table, 0, 5)
    with pytest.raises(JobFailedError, match="went backwards"):
        run_with(spark, job(postgres, table), lake, store, run=1)
    assert not (lake / "out").exists()


# -- a database that cannot be reached (issue 58, item 15) ---------------------------------------


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (taken from the OS, then let go)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli_job(jobs: Path, source: dict[str, Any]) -> None:
    import json

    (jobs / "t").mkdir(parents=True, exist_ok=True)
    job = {"sources": {"db": {"type": "jdbc", **source}}, "sinks": {"out": {"type": "delta", "path": "out"}}}
    (jobs / "t" / "db.conf").write_text(json.dumps(job))


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        pytest.param(
            "jdbc:postgresql://127.0.0.1:{port}/shop", "connection refused: Connection to 127.0.0.1:", id="refused"
        ),
        pytest.param("jdbc:postgresql://no-such-host.invalid:5432/shop", "unknown host: ", id="unknown-host"),
    ],
)
def test_an_unreachable_database_is_exit_1_saying_the_cause_in_run_and_validate(
    spark: Any, lake: Path, url: str, cause: str
) -> None:
    from tests.helpers import run_cli

    jobs = lake.parent / "jobs"
    url = url.format(port=_closed_port())
    _cli_job(
        jobs, {"url": url, "table": "orders", "user": "u", "password": "pw-not-shown", "incremental": {"column": "id"}}
    )
    for mode in ("validate", "run"):
        code, summary, said = run_cli(jobs, "job=t/db", f"warehouse={lake}", f"mode={mode}")
        assert (code, summary["status"]) == (1, "FAILED"), said[-3000:]
        message = summary["message"]
        assert message.startswith(f"cannot read the schema of orders (source `db`) at {url}: {cause}"), message
        assert "(key `job.sources.db`)" in message and "jdbc:jdbc:" not in said and "o2" not in message
        assert "pw-not-shown" not in said
        assert ("mode=validate stopped there: its exit code 1 says" in message) == (mode == "validate")
    assert not (lake / "out").exists()


def test_a_refused_login_and_a_missing_table_say_so_naming_the_connection(
    spark: Any, lake: Path, postgres: Any, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.config.connections import CONNECTIONS_ENV
    from tests.helpers import run_cli

    (tmp_path / "connections").mkdir()
    (tmp_path / "connections" / "shop.yaml").write_text(
        f"type: jdbc\nurl: {postgres.jdbc_url}\nuser: {postgres.user}\npassword: not-the-password\n"
    )
    monkeypatch.setenv(CONNECTIONS_ENV, str(tmp_path / "connections"))
    jobs = lake.parent / "jobs"
    _cli_job(jobs, {"connection": "shop", "table": table, "incremental": {"column": "id"}})
    code, summary, said = run_cli(jobs, "job=t/db", f"warehouse={lake}")
    assert (code, summary["status"]) == (1, "FAILED"), said[-3000:]
    assert ": the login was refused: " in summary["message"] and "password authentication failed" in summary["message"]
    assert summary["message"].endswith("(key `job.sources.db`, connection `shop`)"), summary["message"]
    assert "not-the-password" not in said

    (tmp_path / "connections" / "shop.yaml").write_text(
        f"type: jdbc\nurl: {postgres.jdbc_url}\nuser: {postgres.user}\npassword: {postgres.password}\n"
    )
    _cli_job(jobs, {"connection": "shop", "table": "no_such_table", "incremental": {"column": "id"}})
    code, summary, said = run_cli(jobs, "job=t/db", f"warehouse={lake}", "mode=validate")
    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), said[-3000:]
    assert 'relation "no_such_table" does not exist' in summary["message"]
    assert "(key `job.sources.db.table`, file " in summary["message"]
    assert postgres.password not in said
