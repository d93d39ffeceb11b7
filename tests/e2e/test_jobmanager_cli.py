"""Many JobDags through ./spark-submit.sh: a SIGTERM mid-run (graceful stop, exit 143, nothing
published, a rerun reaches the same outputs as an uninterrupted run), a Hydra multirun in one
Spark application, and the progress lines and final table a scheduler's log shows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT

pytestmark = pytest.mark.e2e

NAP = "reflect('java.lang.Thread', 'sleep', cast(300 as bigint))"  # per record: a run takes a while


def slow_job(src: Path) -> str:
    """Three DAGs whose records each sleep 300 ms in the JVM: a run lasts long enough to be stopped."""
    dags = "\n".join(
        f"  {name} {{\n"
        f'    sources.s {{ type = files, format = json, path = "{src}", schema = "id BIGINT" }}\n'
        f'    converters = [{{ type = derive, columns {{ nap = "{NAP}" }} }}]\n'
        f"    sinks.out {{ type = delta, path = {name} }}\n  }}"
        for name in ("one", "two", "three")
    )
    return f"parallelism = 2\ndags {{\n{dags}\n}}\n"


def jobs_dir(tmp_path: Path) -> Path:
    src = tmp_path / "in" / "rows.json"
    src.parent.mkdir(parents=True)
    src.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(20)))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "slow.conf").write_text(slow_job(src))
    return jobs


def env(jobs: Path) -> dict[str, str]:
    return {**os.environ, "ENGINE_JOBS_DIR": str(jobs)}


def last_json(stdout: str) -> dict[str, Any]:
    parsed = json.loads(stdout.strip().splitlines()[-1])
    assert isinstance(parsed, dict)
    return parsed


def ids(table: Path) -> list[int]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist())


def wait_for(path: Path, needles: list[str], proc: subprocess.Popen[str], timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if all(n in text for n in needles):
            return
        assert proc.poll() is None, f"the run ended early:\n{text[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"never saw {needles}:\n{path.read_text()[-3000:]}")


def test_sigterm_stops_gracefully_and_a_rerun_reaches_the_uninterrupted_outputs(tmp_path: Path) -> None:
    jobs = jobs_dir(tmp_path)
    wh, log = tmp_path / "wh", tmp_path / "output.log"
    # spark-submit's PythonRunner merges the driver's stderr into stdout: one stream, JSON last
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*SUBMIT, "job=slow", f"warehouse={wh}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env(jobs),
            cwd=REPO,
        )
        wait_for(log, ["dag one: running", "dag two: running"], proc)
        proc.send_signal(signal.SIGTERM)  # to spark-submit.sh, as a scheduler does
        proc.wait(timeout=300)
    output = log.read_text()
    assert proc.returncode == 143, output[-3000:]
    summary = last_json(output)
    assert summary["status"] == "CANCELLED" and summary["stopped_by"] == "received SIGTERM"
    assert {d["name"]: d["status"] for d in summary["dags"]} == {
        "one": "CANCELLED",
        "two": "CANCELLED",
        "three": "CANCELLED",
    }
    assert "cancelling its Spark jobs" in output
    for name in ("one", "two", "three"):
        assert not (wh / name / "_delta_log").exists(), f"{name} was published by a stopped run"
    assert subprocess.run(["pgrep", "-f", f"warehouse={wh}"], capture_output=True).returncode == 1, "a process was left"

    rerun = subprocess.run(
        [*SUBMIT, "job=slow", f"warehouse={wh}"], capture_output=True, text=True, env=env(jobs), cwd=REPO
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    clean = tmp_path / "clean"
    straight = subprocess.run(
        [*SUBMIT, "job=slow", f"warehouse={clean}"], capture_output=True, text=True, env=env(jobs), cwd=REPO
    )
    assert straight.returncode == 0, straight.stderr[-3000:]
    for name in ("one", "two", "three"):
        assert ids(wh / name) == ids(clean / name) == list(range(20))


def test_a_multirun_runs_every_job_in_one_application_and_lists_every_run(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    proc = subprocess.run(
        [*SUBMIT, "-m", "job=demo/orders,demo/customers", f"warehouse={wh}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = last_json(proc.stdout)
    assert summary["status"] == "SUCCEEDED" and summary["failed_runs"] == 0
    runs = summary["runs"]
    assert [r["job"] for r in runs] == ["demo.orders", "demo.customers"] or [r["job"] for r in runs] == [
        "orders",
        "customers",
    ]
    assert [r["overrides"][0] for r in runs] == ["job=demo/orders", "job=demo/customers"]
    assert len({r["run_id"] for r in runs}) == 2 and all(r["status"] == "SUCCEEDED" for r in runs)
    assert len(ids_of(wh / "orders", "order_id")) == 40
    assert DeltaTable(str(wh / "customers")).to_pyarrow_table().num_rows > 0
    # a scheduler's log: a line per DAG change, then the table, then the JSON
    output = proc.stdout + proc.stderr
    assert "dag orders: running" in output and "dag orders: succeeded" in output
    assert any(line.split()[:2] == ["dag", "status"] for line in proc.stdout.splitlines())


def ids_of(table: Path, column: str) -> list[Any]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().column(column).to_pylist())
