"""What a scheduler sees of a run through ./spark-submit.sh, stdout and stderr apart: stdout holds
the end-of-run table and the JSON summary only (or JSON lines only, under ``logs=json``), logs go
to stderr, and neither holds a Java stack trace. Run on a glob-sourced job with an inferred schema
(what made Spark print a 70-line trace) whose gate refuses the first run: exit 1, the reason in
the summary and in ``mode=status``, nothing published; the next run, without the gate, reads the
same files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e import REPO, SUBMIT
from tests.helpers import delta_ids

pytestmark = pytest.mark.e2e

TABLE_HEAD = ["dag", "status", "read", "rejected", "written"]
JAVA_TRACE = ("\tat ", "Exception:", "Caused by:")


def job_dir(tmp_path: Path) -> tuple[Path, Path]:
    land = tmp_path / "land"
    land.mkdir()
    for part in range(2):
        rows = [{"id": part * 10 + i, "v": f"p{part}"} for i in range(3)]
        (land / f"part-{part}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "globbed.conf").write_text(
        f'sources.in {{ type = files, format = json, path = "{land}/*.json" }}\n'
        "sinks.out { type = delta, path = out }\n"
        'gates = ["count(*) > 100"]\n'
    )
    return jobs, tmp_path / "wh"


def submit(jobs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SUBMIT, "job=globbed", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "ENGINE_JOBS_DIR": str(jobs)},
    )


def clean_stdout(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The summary, once stdout is the table then the JSON, and nothing else; no Java trace anywhere."""
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split()[:5] == TABLE_HEAD, proc.stdout[-3000:]
    assert set(lines[1]) == {"-", " "} and lines[2].split()[0] == "globbed", proc.stdout[-3000:]
    assert len(lines) == 4, proc.stdout[-3000:]  # head, rule, the DAG's row (one sink: named in it), JSON
    for needle in JAVA_TRACE:
        assert needle not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert "FairSchedulableBuilder" not in proc.stderr and "FileStreamSink" not in proc.stderr
    summary = json.loads(lines[-1])
    assert isinstance(summary, dict)
    return summary


def test_stdout_holds_the_result_and_stderr_the_logs_for_a_refused_then_a_published_run(tmp_path: Path) -> None:
    jobs, wh = job_dir(tmp_path)
    refused = submit(jobs, f"warehouse={wh}")
    assert refused.returncode == 1, (refused.stdout + refused.stderr)[-3000:]
    summary = clean_stdout(refused)
    assert summary["status"] == "FAILED"
    (dag,) = summary["dags"]  # type: ignore[misc]
    assert "gate `count(*) > 100` failed: observed count(*) = 6" in dag["message"]
    assert "refused by quality gates" in refused.stderr and "INFO engine" in refused.stderr
    assert not (wh / "out" / "_delta_log").exists() or delta_ids(wh / "out") == []

    status = submit(jobs, f"warehouse={wh}", "mode=status")
    assert status.returncode == 0, status.stderr[-3000:]
    assert "== why datasets failed in the last run" in status.stdout
    assert "observed count(*) = 6" in status.stdout.split("== why datasets failed in the last run")[1]
    assert "INFO" not in status.stdout

    published = submit(jobs, f"warehouse={wh}", "job.gates=[]")
    assert published.returncode == 0, (published.stdout + published.stderr)[-3000:]
    assert clean_stdout(published)["records_read"] == 6  # the refused files were read again
    assert delta_ids(wh / "out") == [0, 1, 2, 10, 11, 12]


def test_json_logs_make_stdout_json_lines_only(tmp_path: Path) -> None:
    jobs, wh = job_dir(tmp_path)
    proc = submit(jobs, f"warehouse={wh}", "logs=json", "job.gates=[]")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    records = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    *logs, summary = records
    assert summary["status"] == "SUCCEEDED" and summary["records_read"] == 6
    assert logs and all(set(r) >= {"time", "level", "logger", "message"} for r in logs)
    assert any(r["message"] == "dag globbed: running" for r in logs)


def test_spark_s_glob_and_pool_warnings_stay_out_of_a_submitted_application(tmp_path: Path) -> None:
    """The warnings the engine's runs provoke on object storage (a glob read by Spark's file index:
    FileStreamSink's metadata probe logs a FileNotFoundException with its trace) and with its
    per-DAG pools (FairSchedulableBuilder, once per pool), provoked here directly by an application
    submitted through the wrapper, under the log settings it gives every run."""
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.json").write_text('{"id": 1}\n')
    app = tmp_path / "app.py"
    app.write_text(
        "from engine.runtime import build_session\n"
        "spark = build_session('hygiene', {'spark.scheduler.mode': 'FAIR'})\n"
        "spark.sparkContext.setLocalProperty('spark.scheduler.pool', 'not_configured')\n"
        f"print('COUNT', spark.read.json('{land}/*.json').count())\n"
        "spark.stop()\n"
    )
    proc = subprocess.run(
        [*SUBMIT], capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, "ENGINE_APP": str(app)}
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "COUNT 1" in proc.stdout
    for needle in (*JAVA_TRACE, "FileStreamSink", "FairSchedulableBuilder"):
        assert needle not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
