"""Documented keys the job file leaves out, overridden plainly through the command line of
``./spark-submit.sh`` as a user runs it (in this process, on the test session's Spark); outputs
checked with delta-rs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.e2e import REPO
from tests.helpers import run_cli


def test_documented_keys_are_overridden_without_plus_and_others_are_refused(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli.app import main

    wh = tmp_path / "wh"
    code, summary, said = run_cli(
        REPO / "jobs",
        "job=demo/orders",
        f"warehouse={wh}",
        "job.sources.orders.lookback=0",  # the source's default, not in the job file
        "job.converters.7.on_duplicate=reject",  # the dedupe step's default
        "job.sinks.lake.mode=overwrite",  # the sink's default
    )
    assert code == 0, said[-3000:]
    assert summary["errors"] == 8  # the demo's 7, and the older duplicate of order 3 rejected
    errors = DeltaTable(str(wh / "_errors" / "orders")).to_pyarrow_table().to_pylist()
    assert [json.loads(e["record"])["order_id"] for e in errors if e["step"] == "dedupe"] == [3]

    # refused while composing: main() prints the CONFIG_ERROR summary (run_cli's compose_and_run does not)
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(REPO / "jobs"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main(["job=demo/orders", f"warehouse={tmp_path / 'other'}", "job.sources.orders.lookbak=0", "progress=off"])
    out, err = capsys.readouterr()
    assert refused.value.code == 2
    assert json.loads(out.strip().splitlines()[-1])["status"] == "CONFIG_ERROR"
    said = "unknown key `job.sources.orders.lookbak`: did you mean `job.sources.orders.lookback`?"
    assert said in out + err
    assert not (tmp_path / "other").exists()
