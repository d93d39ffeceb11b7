"""Recovery, quarantine, release and abandon, and one run per job at a time."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.commit.lease import Lease
from tests.commit.harness import Inputs, check_exactly_once, crash_run, driver, run_here, write_job


def _dag(summary: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in summary["dags"] if d["name"] == name)


@pytest.mark.crash
def test_a_batch_that_cannot_be_published_is_quarantined_and_the_rest_goes_on(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, max_attempts=2, other_dag=True)
    inputs, other = Inputs(wh), Inputs(wh, "in-other")
    inputs.add("a", 30)
    other.add("x", 6)
    crashed = crash_run(jobs, wh, kill_at="after_sequence_written@crash")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    shutil.rmtree(wh / "out" / "av" / "_engine_staging")  # someone cleaned up: step 1 can never be done

    code, first = run_here(jobs, wh)
    assert code == 1
    assert _dag(first, "crash")["status"] == "FAILED"
    assert "attempt 1 of 2" in _dag(first, "crash")["message"]
    assert "staged file" in _dag(first, "crash")["message"]
    assert _dag(first, "other")["status"] == "SUCCEEDED"  # the rest of the job goes on
    assert not (wh / "out" / "lake" / "_delta_log").exists()  # nothing of the stuck batch is published

    code, second = run_here(jobs, wh)
    assert (code, _dag(second, "crash")["status"]) == (1, "QUARANTINED")
    assert "commit.action=release" in _dag(second, "crash")["message"]
    code, third = run_here(jobs, wh)  # quarantined: not even tried
    assert (code, _dag(third, "crash")["status"]) == (1, "QUARANTINED")

    code, status = run_here(jobs, wh, "mode=status")
    assert code == 0
    (batch,) = status["batches"]
    assert (batch["dag"], batch["batch"], batch["state"], batch["attempts"]) == ("crash", 1, "quarantined", 2)

    code, refused = run_here(jobs, wh, "mode=commit", "commit.action=release")
    assert (code, refused["status"]) == (2, "CONFIG_ERROR")
    assert "commit.reason" in refused["message"]
    code, released = run_here(jobs, wh, "mode=commit", "commit.action=release", "commit.reason=retry once more")
    assert (code, released["status"], released["batch"]) == (0, "CHANGED", 1)
    code, retried = run_here(jobs, wh)
    assert (code, _dag(retried, "crash")["status"]) == (1, "FAILED")
    assert "attempt 1 of 2" in _dag(retried, "crash")["message"]

    code, dropped = run_here(
        jobs, wh, "mode=commit", "commit.action=abandon", "commit.dag=crash", "commit.reason='staging lost; re-read'"
    )
    assert (code, dropped["status"]) == (0, "CHANGED")
    code, healed = run_here(jobs, wh)  # the abandoned range is read again, once
    assert (code, healed["status"]) == (0, "SUCCEEDED"), healed
    check_exactly_once(wh, inputs)
    log = DeltaTable(str(wh / "_engine" / "commit_log")).to_pyarrow_table().to_pylist()
    kinds = [r["kind"] for r in sorted(log, key=lambda r: r["at"]) if r["dag"] == "crash" and r["batch"] == 1]
    assert kinds == ["plan", "sequence", "attempt", "attempt", "released", "attempt", "abandoned"]


def test_a_second_run_of_the_same_job_exits_3_and_touches_nothing(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    inputs = Inputs(wh)
    inputs.add("a", 10)
    holder = Lease(str(wh / "_engine"), "crash", run_id="the-first-run", ttl_seconds=60).acquire()
    try:
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (3, "BUSY")
        assert "run the-first-run" in summary["message"]
        assert not (wh / "out").exists()
        code, summary = run_here(
            jobs,
            wh,
            "mode=checkpoint",
            "checkpoint.action=set",
            f"checkpoint.dataset=files:{wh / 'in' / 'a'}",  # one of the job's datasets, before any run read it
            "checkpoint.kind=file",
            f"checkpoint.value=1700000000000|{wh / 'in' / 'a' / 'x.json'}",
            "checkpoint.reason=r",
        )
        assert code == 3, summary  # changing state under a running job is refused too
    finally:
        holder.release()
    code, summary = run_here(jobs, wh)
    assert code == 0, summary
    check_exactly_once(wh, inputs)


@pytest.mark.crash
def test_two_jobs_run_at_once_against_one_fresh_metadata_location(tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    write_job(jobs, wh, name="second")
    first, second = Inputs(wh), Inputs(wh, "in-second")
    for inputs in (first, second):
        inputs.add("a", 25)
        inputs.add("b", 15)
    procs = [driver(jobs, wh), driver(jobs, wh, job="second")]
    done = [p.communicate_result(600) for p in procs]
    for proc in done:
        assert proc.returncode == 0, proc.stderr[-3000:]
    check_exactly_once(wh, first)
    check_exactly_once(wh, second, name="second")
