"""Many JobDags: a SIGTERM mid-run through ./spark-submit.sh (graceful stop, exit 143, nothing
published, a rerun reaches the same outputs as an uninterrupted run), a Hydra multirun in one
Spark application, and the progress lines and final table a scheduler's log shows.

Only the stopped run is a process of its own (a signal to the wrapper). Its rerun, the clean run
and the multirun are the same command lines run in this process on the test session's Spark."""

from __future__ import annotations

import contextlib
import io
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
from tests.helpers import NAP, NAP_SQL, run_cli


def slow_job(src: Path) -> str:
    """Three DAGs whose records each sleep :data:`NAP` ms in the JVM. The stopped driver gets 300
    (``-Dengine.test.nap=300``): a run lasts long enough to be stopped. The reruns in this process,
    whose JVM never sets it, do not sleep: the same job, so the same outputs, without 12 s of naps each."""
    dags = "\n".join(
        f"  {name} {{\n"
        f'    sources.s {{ type = files, format = json, path = "{src}", schema = "id BIGINT" }}\n'
        f'    converters = [{{ type = derive, columns {{ nap = "{NAP_SQL}" }} }}]\n'
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
    """The stopped driver's environment: the jobs folder, and :data:`NAP` for its JVM."""
    nap = f"-D{NAP}=300"
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    return {**os.environ, "ENGINE_JOBS_DIR": str(jobs), "SPARK_SUBMIT_OPTS": f"{opts} {nap}".strip()}


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


@pytest.mark.e2e
def test_sigterm_stops_gracefully_and_a_rerun_reaches_the_uninterrupted_outputs(spark: object, tmp_path: Path) -> None:
    """A process: the stop is SIGTERM to ``spark-submit.sh``, as a scheduler sends it, and the
    wrapper's exit code and the processes it leaves (none) are a real process's. The rerun and
    the clean run it is compared with run in this process."""
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

    code, _, said = run_cli(jobs, "job=slow", f"warehouse={wh}")
    assert code == 0, said[-3000:]
    clean = tmp_path / "clean"
    code, _, said = run_cli(jobs, "job=slow", f"warehouse={clean}")
    assert code == 0, said[-3000:]
    for name in ("one", "two", "three"):
        assert ids(wh / name) == ids(clean / name) == list(range(20))


def multirun_here(jobs: Path, *args: str) -> tuple[int, str, str]:
    """``./spark-submit.sh -m <args>`` in this process (the test session's Spark): through
    ``main()``, which alone prints a multirun's summary, with the progress left on (a scheduler's
    log: not a terminal) so that the end table is printed as well. Its exit code, stdout and
    stderr (where the run's log lines go: logging is configured on the ``sys.stderr`` of the run)."""
    from engine.cli.app import main

    saved = os.environ.get("ENGINE_JOBS_DIR")
    os.environ["ENGINE_JOBS_DIR"] = str(jobs)
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(["-m", *args])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    finally:
        if saved is None:
            os.environ.pop("ENGINE_JOBS_DIR", None)
        else:
            os.environ["ENGINE_JOBS_DIR"] = saved
    assert code is not None, "main() always exits"
    return code, out.getvalue(), err.getvalue()


def test_a_multirun_runs_every_job_in_one_application_and_lists_every_run(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: the multirun's summary, its runs' outputs, their log lines and the end
    table are what Python prints; that stdout holds nothing else is the output-hygiene tests'
    (tests/e2e/test_output_hygiene.py, test_spark_submit.py). A multirun in a long-lived process
    leaves nothing in its working directory (Hydra's sweep folder is kept out of it)."""
    wh, cwd = tmp_path / "wh", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("ENGINE_TTY", raising=False)  # a scheduler's log: progress lines, not the live view
    session = spark.conf  # type: ignore[attr-defined]
    shuffle = session.get("spark.sql.shuffle.partitions")
    try:
        code, stdout, stderr = multirun_here(REPO / "jobs", "job=demo/orders,demo/customers", f"warehouse={wh}")
    finally:  # the engine's Spark profile sets its own
        session.set("spark.sql.shuffle.partitions", shuffle)
    assert code == 0, (stderr + stdout)[-3000:]
    assert sorted(p.name for p in cwd.iterdir()) == [], "Hydra's output or sweep folders in the working directory"
    summary = last_json(stdout)
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
    output = stdout + stderr
    assert "dag orders: running" in output and "dag orders: succeeded" in output
    assert any(line.split()[:2] == ["dag", "status"] for line in stdout.splitlines())


def ids_of(table: Path, column: str) -> list[Any]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().column(column).to_pylist())
