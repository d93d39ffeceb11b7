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


# -- a failed task's stack trace (issue 58, item 13) ---------------------------------------------


def broken_jobs(tmp_path: Path) -> Path:
    """Jobs whose tasks fail in Spark: a truncated gzip, an apply_changes event without its
    sequence, a lookup reference holding a key twice (three DAGs of one job); and a Parquet file
    that is not Parquet, skipped by ``on_corrupt = skip`` (a run that succeeds)."""
    import gzip

    data = tmp_path / "data"
    for folder in ("gz", "cdc", "ref", "lk", "pq"):
        (data / folder).mkdir(parents=True)
    whole = gzip.compress("".join(json.dumps({"id": i}) + "\n" for i in range(2000)).encode())
    (data / "gz" / "a.json.gz").write_bytes(whole[: len(whole) // 2])
    (data / "cdc" / "a.json").write_text('{"id": 1, "seq": 1}\n{"id": 2, "seq": null}\n')
    (data / "ref" / "r.json").write_text('{"k": 1, "name": "a"}\n{"k": 1, "name": "b"}\n')
    (data / "lk" / "a.json").write_text('{"k": 1}\n')
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2]}), data / "pq" / "good.parquet")
    (data / "pq" / "bad.parquet").write_bytes(b"PAR1 this is not a Parquet file PAR1")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "broken.conf").write_text(
        "dags {\n"
        f'  gz {{ sources.in {{ type = files, format = json, path = "{data}/gz/*.json.gz", schema = "id INT" }}\n'
        "       sinks.lake { type = delta, path = gz } }\n"
        f'  cdc {{ sources.in {{ type = files, format = json, path = "{data}/cdc/*.json",\n'
        '                      schema = "id INT, seq INT" }\n'
        "        sinks.lake { type = delta, path = cdc, mode = apply_changes, keys = [id], sequence_by = seq } }\n"
        f'  lk {{ sources.in {{ type = files, format = json, path = "{data}/lk/*.json", schema = "k INT" }}\n'
        f'       converters = [ {{ type = lookup, name = r, path = "{data}/ref", format = json,\n'
        '                         schema = "k INT, name STRING", on = [k] } ]\n'
        "       sinks.lake { type = delta, path = lk } }\n"
        "}\n"
    )
    (jobs / "skipping.conf").write_text(
        f'sources.in {{ type = files, format = parquet, path = "{data}/pq/*.parquet", on_corrupt = skip }}\n'
        "sinks.lake { type = delta, path = pq }\n"
    )
    return jobs


def submit_logged(jobs: Path, logs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SUBMIT, *args, "progress=off"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "ENGINE_JOBS_DIR": str(jobs), "ENGINE_LOG_DIR": str(logs)},
    )


TASK_LINES = ("Exception in task", "Lost task", "Aborting job", "Putting block")
"""What Spark logs of a failed task besides its trace: left to the log file too."""
TRACES = ("\tat ", "Caused by:", "Traceback (most recent call last)", "py4j.protocol.Py4JJavaError", *TASK_LINES)
"""A stack trace, Java's or Python's, or a task's failure as Spark logs it. (The engine's own line
may quote a Java exception's name: ``org.apache.spark.SparkException: [FAILED_READ_FILE...] ...``.)"""


def the_log_file(proc: subprocess.CompletedProcess[str], logs: Path) -> Path:
    """The run's Spark log, named once on stderr: the one file in ``logs``."""
    (file,) = list(logs.iterdir())
    said = f"Spark's warnings and errors of this run, with their stack traces: {file}"
    assert proc.stderr.count(said) == 1, proc.stderr[-3000:]
    return file


def test_a_failed_task_s_stack_trace_goes_to_the_run_s_log_file_not_stderr(tmp_path: Path) -> None:
    jobs, logs = broken_jobs(tmp_path), tmp_path / "logs"
    proc = submit_logged(jobs, logs, "job=broken", f"warehouse={tmp_path / 'wh'}")
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    messages = {d["name"]: d["message"] for d in summary["dags"]}
    assert sorted(summary["failed_dags"]) == ["cdc", "gz", "lk"], messages
    assert "Encountered error while reading file" in messages["gz"] and "a.json.gz" in messages["gz"]
    assert "a change event has no `seq`" in messages["cdc"]
    assert "(k) = (1) matches 2 rows of the reference" in messages["lk"]
    for needle in TRACES:
        assert needle not in proc.stdout + proc.stderr, (needle, proc.stderr[-3000:])
    assert len(proc.stderr.splitlines()) < 30, proc.stderr  # the engine's lines, not hundreds of Spark's
    traces = the_log_file(proc, logs).read_text()
    assert "\tat org.apache.spark" in traces and "Caused by: java.io.EOFException" in traces
    assert "Exception in task" in traces and "USER_RAISED_EXCEPTION" in traces


def test_a_corrupt_file_skipped_leaves_stderr_clean_and_debug_shows_the_trace(tmp_path: Path) -> None:
    jobs, logs = broken_jobs(tmp_path), tmp_path / "logs"
    proc = submit_logged(jobs, logs, "job=skipping", f"warehouse={tmp_path / 'wh'}")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (summary["status"], summary["records_read"], summary["errors"]) == ("SUCCEEDED", 3, 1)
    assert delta_ids(tmp_path / "wh" / "pq") == [1, 2]
    for needle in TRACES:
        assert needle not in proc.stdout + proc.stderr, (needle, proc.stderr[-3000:])
    assert "bad.parquet" in the_log_file(proc, logs).read_text()

    (jobs / "skipping.conf").write_text((jobs / "skipping.conf").read_text().replace("path = pq", "path = pq2"))
    shown = submit_logged(jobs, tmp_path / "logs2", "job=skipping", f"warehouse={tmp_path / 'wh2'}", "debug=true")
    assert shown.returncode == 0, (shown.stdout + shown.stderr)[-3000:]
    assert "Exception in task" in shown.stderr and "\tat org.apache" in shown.stderr  # as Spark prints them
