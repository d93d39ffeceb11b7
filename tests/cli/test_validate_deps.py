"""``mode=validate`` follows ``mode=run``'s rule for DAGs that run ``after`` others: an input an
upstream DAG writes (directly or through its own upstreams) need not exist yet; an input nobody
writes must. Through the command line, in this process (the test session's Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import delta_ids, run_cli, write_jsonl


def flights_job(jobs: Path, src: Path, *dags: str) -> None:
    """``jobs/t/flights.conf``: ``flights`` lands ``src`` as Delta table ``flights``; ``dags`` follow."""
    (jobs / "t").mkdir(parents=True, exist_ok=True)
    land = (
        f'flights {{ sources.s {{ type = files, format = json, path = "{src}", schema = "id BIGINT" }}, '
        "sinks.lake { type = delta, path = flights } }"
    )
    (jobs / "t" / "flights.conf").write_text("dags {\n  " + "\n  ".join([land, *dags]) + "\n}\n")


def reader(name: str, after: str, path: str) -> str:
    return (
        f"{name} {{ after = [{after}], sources.f {{ type = delta, path = {path} }}, "
        f"sinks.out {{ type = delta, path = {name} }} }}"
    )


@pytest.fixture
def src(lake: Path) -> Path:
    return write_jsonl(lake.parent / "in" / "flights.json", [{"id": i} for i in range(3)])


@pytest.mark.parametrize(
    "dags",
    [
        pytest.param([reader("flights_named", "flights", "flights")], id="direct-upstream"),
        pytest.param(
            [reader("middle", "flights", "flights"), reader("flights_named", "middle", "flights")],
            id="through-an-upstream-of-the-upstream",
        ),
    ],
)
def test_validate_accepts_a_delta_input_an_upstream_creates_and_run_reads_it(
    spark: Any, lake: Path, src: Path, dags: list[str]
) -> None:
    jobs = lake.parent / "jobs"
    flights_job(jobs, src, *dags)

    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", "mode=validate")
    assert (code, summary["status"]) == (0, "VALID"), said
    assert list(lake.iterdir()) == []  # validation wrote nothing

    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), said
    assert delta_ids(lake / "flights_named") == [0, 1, 2]


@pytest.mark.parametrize("mode", [pytest.param("validate", id="validate"), pytest.param("run", id="run")])
def test_an_input_no_upstream_writes_must_exist_in_both_modes(spark: Any, lake: Path, src: Path, mode: str) -> None:
    jobs = lake.parent / "jobs"
    flights_job(jobs, src, reader("flights_named", "flights", "flighst"))  # a typo: nobody writes it

    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", f"mode={mode}")

    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), said
    assert "not a Delta table" in summary["message"]
    assert "job.dags.flights_named.sources.f.path" in summary["message"]
    assert not (lake / "flights").exists() and not (lake / "_engine" / "runs").exists()


@pytest.mark.parametrize("mode", [pytest.param("validate", id="validate"), pytest.param("run", id="run")])
def test_a_glob_over_the_directories_upstreams_write_is_accepted_on_a_fresh_warehouse(
    spark: Any, lake: Path, src: Path, mode: str
) -> None:
    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True, exist_ok=True)
    (jobs / "t" / "flights.conf").write_text(
        "dags {\n"
        f'  land {{ sources.s {{ type = files, format = json, path = "{src}", schema = "id BIGINT" }}, '
        "sinks.lake { type = delta, path = out/a } }\n"
        f'  all {{ after = [land], sources.f {{ type = files, format = parquet, path = "{lake}/out/*/*.parquet", '
        'schema = "id BIGINT" }, sinks.o { type = delta, path = all } }\n'
        "}\n"
    )
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", f"mode={mode}")
    assert (code, summary["status"]) == (0, "SUCCEEDED" if mode == "run" else "VALID"), said
    if mode == "run":  # the dependent plans when it starts: it reads what its upstream wrote in the same run
        assert delta_ids(lake / "all") == [0, 1, 2]
