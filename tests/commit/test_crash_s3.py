"""Exactly-once under crashes with the warehouse on S3 (tests/s3.py's server): a subset of the crash
matrix. The metadata, the commit log, the lease, the error table and every sink live in the bucket
(the sinks' paths are relative to the warehouse); the input stays on the local disk. The driver is
killed before, during and after publishing, the job runs again twice, and the bucket, copied to a
local folder, must hold every record exactly once with the watermarks at the last file published.
Credentials come from a named connection only: the killed driver and the reruns in this process
reach the bucket through it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.commit.harness import Inputs, check_exactly_once, crash_run, run_here, write_job
from tests.s3 import S3Server

pytestmark = pytest.mark.s3

POINTS = [
    "after_plan_saved",  # before publishing: the plan is in the commit log (on S3)
    "mid_step:4",  # during: the Delta sink published, between the renames (copies) of the Parquet one's
    "before_done",  # after: everything published, the sequence not yet marked done
]


@pytest.mark.crash
@pytest.mark.parametrize("point", POINTS)
def test_crash_then_rerun_on_an_s3_warehouse_publishes_exactly_once(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    local, jobs = tmp_path / "local", tmp_path / "jobs"
    write_job(jobs, local)
    monkeypatch.setenv("ENGINE_CONNECTIONS_DIR", str(s3_server.connection(tmp_path / "connections", bucket).parent))
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    wh = f"s3a://{bucket}/wh"
    using = "storage.connections=[lake_s3]"
    inputs = Inputs(local)
    inputs.add("a", 40)
    inputs.add("b", 30)
    inputs.add("a", 25)

    crashed = crash_run(jobs, wh, kill_at=point, extra=[using])
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    assert f"killed at {point} in dag crash" in crashed.stderr

    inputs.add("b", 20)  # new input arrives while the job is down
    code, rerun = run_here(jobs, wh, using)
    assert (code, rerun["status"]) == (0, "SUCCEEDED"), rerun
    code, again = run_here(jobs, wh, using)
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    check_exactly_once(s3_server.download(bucket, "wh/", tmp_path / "copy"), inputs)
