"""A publish the table refuses (issue 58, item 6): the same batch would fail the same way on every
retry, so it is quarantined at once, says so, and waits for an operator; once the cause is fixed
and the batch released, it publishes exactly once. Tables read with delta-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from engine.state.conflicts import is_deterministic
from tests.commit.harness import run_here
from tests.helpers import write_jsonl


def write_job(jobs: Path, wh: Path) -> None:
    job = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(wh / "in"), "schema": "id INT, v INT"}},
        "sinks": {"lake": {"type": "delta", "path": "lake", "mode": "merge", "keys": ["id"]}},
    }
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "crash.yaml").write_text(yaml.safe_dump(job))


def test_a_publish_the_table_refuses_is_quarantined_at_once_and_not_retried(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    write_jsonl(wh / "in" / "a.json", [{"id": 1, "v": 5}])
    assert run_here(jobs, wh)[0] == 0
    lake = wh / "lake"
    # Someone adds a constraint the next batch breaks: staging (Parquet) cannot know, the MERGE refuses.
    spark.sql(f"ALTER TABLE delta.`{lake}` ADD CONSTRAINT positive CHECK (v > 0)")
    write_jsonl(wh / "in" / "b.json", [{"id": 2, "v": -1}])
    code, first = run_here(jobs, wh)
    assert (code, first["status"]) == (1, "FAILED"), first
    said = first["dags"][0]["message"]
    assert "running it again would fail the same way, so it is quarantined (not retried)" in said, said
    assert "commit.action=release" in said

    code, second = run_here(jobs, wh)  # not tried again: the DAG waits
    assert code == 1
    assert second["dags"][0]["status"] == "QUARANTINED", second
    assert "no retry can mend" in second["dags"][0]["message"]
    attempts = [r for r in _log(wh) if r["kind"] == "attempt"]
    assert len(attempts) == 1, "one attempt, however many runs"

    spark.sql(f"ALTER TABLE delta.`{lake}` DROP CONSTRAINT positive")
    code, released = run_here(
        jobs, wh, "mode=commit", "commit.action=release", "commit.dag=crash", "commit.reason=fixed"
    )
    assert code == 0, released
    code, third = run_here(jobs, wh)
    assert (code, third["status"]) == (0, "SUCCEEDED"), third
    assert sorted(DeltaTable(str(lake)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": 5},
        {"id": 2, "v": -1},
    ]


def _log(wh: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(wh / "_engine" / "commit_log")).to_pyarrow_table().to_pylist()


def test_which_failures_no_retry_can_mend(spark: Any, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as unknown:
        spark.range(1).select("nope").collect()
    assert is_deterministic(unknown.value), "a column the statement names is not there (42703)"
    try:
        spark.sql("SELECT CAST('x' AS INT)").collect()
    except Exception as exc:  # ANSI mode: CAST_INVALID_INPUT, 22018
        assert is_deterministic(exc)
    else:
        pytest.skip("ANSI mode is off: the cast gives null")
    with pytest.raises(Exception) as missing:
        spark.read.parquet(str(tmp_path / "nowhere")).collect()
    assert not is_deterministic(missing.value), "PATH_NOT_FOUND (42K03): a VACUUM another writer ran may cause it"

    class Wrapped(Exception):
        pass

    def wrapped(cause: BaseException) -> Wrapped:
        try:
            raise Wrapped("step 1 failed") from cause
        except Wrapped as exc:
            return exc

    assert is_deterministic(wrapped(unknown.value)), "through the step that raised it"
    assert not is_deterministic(OSError("connection reset by peer")), "no SQLSTATE: a retry may not meet it"
    assert not is_deterministic(RuntimeError("ConcurrentAppendException: Files were added [SQLSTATE: 2D521]"))
    # a unique key another writer inserted first: PostgreSQL's state, and the one SQL Server, Oracle
    # and MySQL give every integrity violation (retried as any other failure, not quarantined at once)
    for state in ("23505", "23000"):
        assert not is_deterministic(RuntimeError(f"duplicate key value violates unique constraint [SQLSTATE: {state}]"))
    assert is_deterministic(RuntimeError("null value in column violates not-null constraint [SQLSTATE: 23502]"))
