"""Documented keys the job file leaves out, overridden plainly through ./spark-submit.sh, as a user
runs it; outputs checked with delta-rs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT

pytestmark = pytest.mark.e2e


def submit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=600, cwd=REPO)


def last_line(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(parsed, dict)
    return parsed


def test_documented_keys_are_overridden_without_plus_and_others_are_refused(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    proc = submit(
        "job=demo/orders",
        f"warehouse={wh}",
        "job.sources.orders.lookback=0",  # the source's default, not in the job file
        "job.converters.7.on_duplicate=reject",  # the dedupe step's default
        "job.sinks.lake.mode=overwrite",  # the sink's default
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert last_line(proc)["errors"] == 8  # the demo's 7, and the older duplicate of order 3 rejected
    errors = DeltaTable(str(wh / "_errors" / "orders")).to_pyarrow_table().to_pylist()
    assert [json.loads(e["record"])["order_id"] for e in errors if e["step"] == "dedupe"] == [3]

    refused = submit("job=demo/orders", f"warehouse={tmp_path / 'other'}", "job.sources.orders.lookbak=0")
    assert refused.returncode == 2
    assert last_line(refused)["status"] == "CONFIG_ERROR"
    said = "unknown key `job.sources.orders.lookbak`: did you mean `job.sources.orders.lookback`?"
    assert said in refused.stdout + refused.stderr
    assert not (tmp_path / "other").exists()
