"""Exactly-once under crashes: every kill point x every sink type x publish policy full/partial.

Each case: a driver process is killed (SIGKILL) at one point of the publish protocol; new input
arrives; the job runs again (repairing the crashed batch) and once more. Every sink (Delta, Parquet, Avro, JSON)
and the error table must then hold each source record exactly once, read without Spark, and each
dataset's stored watermark must be the last file published. Under ``partial`` the crashing run
also has one dataset failing, so its batch publishes the other dataset alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.commit.harness import Inputs, check_exactly_once, crash_run, run_here, sink_ids, write_job

# The job's sequence (sinks in name order): 1 av (Avro), 2 js (JSON), 3 lake (Delta), 4 pq
# (Parquet, partitioned: several files, so mid_step:4 stops between renames), 5 the error table,
# 6 delete staging, 7 log the files read, 8 set watermarks. before_state_saved is the moment after
# step 7, before_done the one after step 8.
POINTS = [
    "after_plan_saved",
    "after_staging",
    "after_sequence_written",
    "after_step:1",
    "after_step:2",
    "after_step:3",
    "mid_step:4",
    "after_step:4",
    "after_step:5",
    "after_step:6",
    "before_state_saved",
    "before_done",
]


@pytest.mark.crash
@pytest.mark.parametrize("policy", ["full", "partial"])
@pytest.mark.parametrize("point", POINTS)
def test_crash_then_rerun_publishes_exactly_once(spark: Any, tmp_path: Path, point: str, policy: str) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, policy=policy)
    inputs = Inputs(wh)
    inputs.add("a", 40)
    inputs.add("b", 30)
    inputs.add("a", 25)

    crashed = crash_run(jobs, wh, kill_at=point, fail="*/in/b" if policy == "partial" else "")
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    assert f"killed at {point} in dag crash" in crashed.stderr
    assert any(n.startswith("blockmgr-") for n in crashed.left_behind), "its JVM was stopped, not killed with it"

    inputs.add("b", 20)  # new input arrives while the job is down
    code, rerun = run_here(jobs, wh)  # repairs the crashed batch (a stored plan runs as it was)
    assert (code, rerun["status"]) == (0, "SUCCEEDED"), rerun
    code, again = run_here(jobs, wh)  # whatever the repaired batch did not cover
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    check_exactly_once(wh, inputs)


def test_a_clean_run_publishes_every_sink_and_leaves_no_staging(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    inputs = Inputs(wh)
    inputs.add("a", 30)
    inputs.add("b", 12)
    code, summary = run_here(jobs, wh)
    assert code == 0, summary
    assert summary["sinks"] == {"crash.lake": 36, "crash.pq": 36, "crash.av": 36, "crash.js": 36}
    check_exactly_once(wh, inputs)
    assert len(sink_ids(wh)["errors"]) == 6
