"""Config mistakes Spark's analysis lets through are config errors before anything is written.

Found on real data: a fork ``late = "arr_delay >> 60"`` (a shift, not a comparison) was cast to
boolean and sent 121,946 of 224,910 rows to the branch; a DDL schema with a typo, a regex that
does not compile and a datetime pattern Spark refuses ended as job failures (exit 1) without the
key. Each is now exit 2 naming the key, in ``mode=validate`` and ``mode=run`` alike, through the
command line (run in this process, on the test session's Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import EXIT_CONFIG, ConfigError
from tests.helpers import run_cli, run_dict, write_jsonl

FLIGHTS = [
    {"id": 1, "carrier": "AA", "arr_delay": 75, "sched": "2026-11-01 10:00"},
    {"id": 2, "carrier": "B6", "arr_delay": 3, "sched": "2026-11-01 11:30"},
]
GOOD = {
    "schema": '"id BIGINT, carrier STRING, arr_delay INT, sched STRING"',
    "check": '"arr_delay > -60"',
    "pattern": '"[A-Z0-9]{2}"',
    "format": '"yyyy-MM-dd HH:mm"',
    "fork": '"arr_delay > 60"',
}


def flights_job(jobs: Path, src: Path, **mistake: str) -> None:
    """``jobs/t/flights.conf``: every key that takes a regex, a datetime pattern, a DDL schema or a
    boolean expression, with ``mistake`` replacing one (HOCON values; ``schema = None``: inferred)."""
    v = {**GOOD, **mistake}
    schema = f"schema = {v['schema']}" if v["schema"] != "None" else ""
    (jobs / "t").mkdir(parents=True, exist_ok=True)
    (jobs / "t" / "flights.conf").write_text(
        f"""
        name = flights
        sources.flights {{ type = files, format = json, path = "{src}", {schema} }}
        converters = [
          {{ type = require, columns = [id] }}
          {{ type = check, name = plausible_delay, expr = {v["check"]} }}
          {{ type = regex, column = carrier, pattern = {v["pattern"]} }}
          {{ type = parse_timestamp, column = sched, format = {v["format"]} }}
        ]
        forks {{ late = {v["fork"]} }}
        sinks.lake {{ type = delta, path = flights }}
        sinks.late {{ type = parquet, from = late, path = late }}
        """
    )


MISTAKES = [
    pytest.param(
        {"fork": '"arr_delay >> 60"'},
        "job.forks.late",
        "branch `late`: `arr_delay >> 60` is of type int, not boolean",
        id="fork-not-boolean",
    ),
    pytest.param(
        {"check": '"arr_delay"'},
        "job.converters[1].expr",
        "converter `plausible_delay`: `arr_delay` is of type int, not boolean",
        id="check-not-boolean",
    ),
    pytest.param(
        {"check": '"carrier"'},
        "job.converters[1].expr",
        "`carrier` is of type string, not boolean",
        id="check-string-not-boolean",
    ),
    pytest.param(
        {"pattern": '"[a-"'},
        "job.converters[2].pattern",
        "the regular expression '[a-' does not compile: Illegal character range",
        id="regex-does-not-compile",
    ),
    pytest.param(
        {"pattern": '"A)|(B"'},
        "job.converters[2].pattern",
        "Unmatched closing ')'",
        id="regex-escapes-the-whole-value-group",
    ),
    pytest.param(
        {"format": '"yyyy-MM-dd QQQQQQ"'},
        "job.converters[3].format",
        "Spark refuses the datetime pattern 'yyyy-MM-dd QQQQQQ': [INVALID_DATETIME_PATTERN.ILLEGAL_CHARACTER]",
        id="timestamp-format-illegal-letter",
    ),
    pytest.param(
        {"format": '"YYYY-ww HH:mm"'},
        "job.converters[3].format",
        "Fail to recognize 'YYYY-ww HH:mm' pattern",
        id="timestamp-format-week-based",
    ),
    pytest.param(
        {"schema": '"id BIGINTT, v"'},
        "job.sources.flights.schema",
        "the schema 'id BIGINTT, v' is not a Spark DDL list of columns",
        id="ddl-does-not-parse",
    ),
    pytest.param(
        {"schema": '"id BIGINTT, carrier STRING"'},
        "job.sources.flights.schema",
        'Unsupported data type "BIGINTT"',
        id="ddl-unknown-type",
    ),
    pytest.param(
        {"schema": "None", "pattern": '"[a-"'},
        "job.converters[2].pattern",
        "does not compile",
        id="regex-with-inferred-schema",
    ),
    pytest.param(
        {"schema": "None", "format": '"yyyy-MM-dd QQQQQQ"'},
        "job.converters[3].format",
        "Spark refuses the datetime pattern",
        id="timestamp-format-with-inferred-schema",
    ),
]


@pytest.mark.parametrize("mode", ["validate", "run"])
@pytest.mark.parametrize(("mistake", "key", "needle"), MISTAKES)
def test_a_mistake_is_exit_2_naming_the_key_before_anything_is_written(
    spark: Any, lake: Path, mode: str, mistake: dict[str, str], key: str, needle: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, src, **mistake)
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", f"mode={mode}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert summary["status"] == "CONFIG_ERROR"
    assert needle in summary["message"]
    assert f"key `{key}`" in summary["message"]
    assert f"file {jobs / 't' / 'flights.conf'}" in summary["message"]
    assert list(lake.iterdir()) == []


def test_the_good_job_validates_and_runs(spark: Any, lake: Path) -> None:
    """The table's baseline: without a mistake the same job is valid and runs."""
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, src)
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", "mode=validate")
    assert (code, summary["status"]) == (0, "VALID"), said[-3000:]
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), said[-3000:]
    assert summary["sinks"] == {"flights.lake": 2, "flights.late": 1}


def test_a_non_boolean_fork_over_an_inferred_schema_is_caught_when_planning(spark: Any, lake: Path) -> None:
    """Without a declared schema the fork's type is only known once Spark infers the schema:
    ``mode=validate`` runs no job so cannot see it, ``mode=run`` refuses it while planning."""
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, src, schema="None", fork='"arr_delay >> 60"')
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", "mode=validate")
    assert (code, summary["status"]) == (0, "VALID"), said[-3000:]
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "branch `late`: `arr_delay >> 60` is of type bigint, not boolean" in summary["message"]
    assert "key `job.forks.late`" in summary["message"]
    assert list(lake.iterdir()) == []


def test_a_dag_that_runs_after_another_is_checked_over_its_declared_schema_before_any_write(
    spark: Any, lake: Path
) -> None:
    """A DAG with ``after`` is planned only when it starts (its input may not exist yet); with a
    declared schema its chain is still checked up front, so the upstream writes nothing either."""
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    schema = "id BIGINT, carrier STRING, arr_delay INT, sched STRING"
    upstream = lake.parent / "staged"
    job = {
        "dags": {
            "stage": {
                "sources": {"s": {"type": "files", "format": "json", "path": str(src), "schema": schema}},
                "sinks": {"out": {"type": "parquet", "path": str(upstream), "mode": "overwrite"}},
            },
            "report": {
                "after": ["stage"],
                "sources": {"s": {"type": "files", "format": "parquet", "path": str(upstream), "schema": schema}},
                "forks": {"late": "arr_delay >> 60"},
                "sinks": {"late": {"type": "delta", "from": "late", "path": "late"}},
            },
        }
    }
    with pytest.raises(ConfigError, match="branch `late`: `arr_delay >> 60` is of type int") as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.dags.report.forks.late"
    assert not upstream.exists()
    assert list(lake.iterdir()) == []


def test_a_run_with_nothing_to_read_skips_a_check_that_passed_but_never_a_changed_one(spark: Any, lake: Path) -> None:
    """The chain check costs seconds on a fresh JVM. A run with nothing to read skips it when the
    same config, schema, code and SQL settings passed before; a mistake made since still fails the
    very next run, new data or not, before anything is written."""
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, src)
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["sinks"]) == (0, {"flights.lake": 2, "flights.late": 1}), said[-3000:]
    assert "passed this check before" not in said
    assert [p.name for p in (lake / "_engine" / "checks" / "flights").iterdir()] == ["flights"]

    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), said[-3000:]
    assert "dag flights: nothing to read, and its chain passed this check before" in said

    more = "spark.conf={spark.sql.shuffle.partitions:3}"
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", more)
    assert (code, summary.get("status")) == (0, "SUCCEEDED"), (summary, said[-3000:])
    assert "passed this check before" not in said  # another SQL setting: checked again
    for skips in (False, True):  # back to the job's settings: checked once, then skipped again
        code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
        assert (code, "passed this check before" in said) == (0, skips), said[-3000:]

    flights_job(jobs, src, fork='"arr_delay >> 60"')  # the fork alone changes
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "key `job.forks.late`" in summary["message"]
    assert spark.read.format("delta").load(str(lake / "flights")).count() == 2


def test_a_run_with_new_data_skips_a_check_that_passed_and_still_checks_a_changed_one(spark: Any, lake: Path) -> None:
    """New data does not change what the check depends on: the next run reads it without checking
    the chain again (seconds on a fresh JVM), and its records meet every step and branch all the
    same. A mistake made since fails the next run before anything is written."""
    inbox = lake.parent / "in"
    write_jsonl(inbox / "a.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, inbox)
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["sinks"]) == (0, {"flights.lake": 2, "flights.late": 1}), said[-3000:]
    assert "passed this check before" not in said

    more = [{**f, "id": f["id"] + 10, "arr_delay": 90} for f in FLIGHTS] + [{"carrier": "AA", "arr_delay": 1}]
    write_jsonl(inbox / "b.json", more)  # type: ignore[arg-type]
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, summary["sinks"], summary["errors"]) == (0, {"flights.lake": 2, "flights.late": 2}, 1), said[-3000:]
    assert "dag flights: its chain passed this check before: not checked again" in said
    late = spark.read.parquet(str(lake / "late")).select("id").collect()
    assert sorted(r.id for r in late) == [1, 11, 12]  # the fork, unchecked, still decides

    write_jsonl(inbox / "c.json", FLIGHTS)  # type: ignore[arg-type]
    flights_job(jobs, inbox, fork='"arr_delay >> 60"')
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "key `job.forks.late`" in summary["message"]
    assert spark.read.format("delta").load(str(lake / "flights")).count() == 4


def test_an_idle_run_over_an_inferred_schema_skips_the_check_by_the_pinned_schema(spark: Any, lake: Path) -> None:
    """Without a declared schema the key holds the pinned schema: an idle run skips the check, and
    a mistake made since still fails it."""
    src = write_jsonl(lake.parent / "in" / "flights.json", FLIGHTS)  # type: ignore[arg-type]
    jobs = lake.parent / "jobs"
    flights_job(jobs, src, schema="None")
    for skips in (False, True):
        code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
        assert (code, summary["status"], "passed this check before" in said) == (0, "SUCCEEDED", skips), said[-3000:]
    flights_job(jobs, src, schema="None", fork='"arr_delay >> 60"')
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "branch `late`: `arr_delay >> 60` is of type bigint, not boolean" in summary["message"]
