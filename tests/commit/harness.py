"""Crash-and-rerun harness shared by the crash matrix and the soak script.

One job reads JSON-lines files from ``<wh>/in/<dataset>/`` (one dataset per directory), rejects
records with a negative amount, and writes the rest to a Delta table, Parquet (partitioned by
day), Avro and JSON sinks; rejected records go to the error table. A crash run is a real process
(``python main.py``, leading its process group) killed with its JVM by SIGKILL at a named point;
reruns go through the same CLI entry in this process. :func:`check_exactly_once` then reads
every sink with readers that are not Spark (delta-rs, pyarrow, fastavro, json) and the state table with delta-rs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
JOB = "crash"


def write_job(
    jobs_dir: Path, wh: Path, *, policy: str = "full", name: str = JOB, max_attempts: int = 3, other_dag: bool = False
) -> None:
    """The job file ``<jobs_dir>/<name>.yaml`` (input ``<wh>/in`` and sinks ``<wh>/out`` for the
    default name, ``in-<name>``/``out-<name>`` otherwise). ``other_dag`` adds a second DAG
    (``other``: ``<wh>/in-other`` into the Delta table ``out-other``)."""
    suffix = "" if name == JOB else f"-{name}"
    out = f"out{suffix}"
    dag = {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(wh / f"in{suffix}"),
                "datasets": "directory",
                "schema": "id BIGINT, day STRING, amount DOUBLE",
            }
        },
        "converters": [{"type": "check", "expr": "amount >= 0", "reason": "negative amount"}],
        "sinks": {
            "lake": {"type": "delta", "path": f"{out}/lake"},
            "pq": {"type": "parquet", "path": f"{out}/pq", "partition_by": ["day"]},
            "av": {"type": "avro", "path": f"{out}/av"},
            "js": {"type": "json", "path": f"{out}/js"},
        },
    }
    shared = {"publish": {"policy": policy, "max_attempts": max_attempts}, "work_units": {"max_groups": 2}}
    if other_dag:
        other = {
            "sources": {"in": {**dag["sources"]["in"], "path": str(wh / "in-other")}},  # type: ignore[index]
            "sinks": {"lake": {"type": "delta", "path": "out-other"}},
        }
        job: dict[str, Any] = {"dags": {name: dag, "other": other}, **shared}
    else:
        job = {**dag, **shared}
    jobs_dir.mkdir(parents=True, exist_ok=True)
    (jobs_dir / f"{name}.yaml").write_text(yaml.safe_dump(job))


class Inputs:
    """Input files with strictly increasing ids and modification times; every 7th id is bad."""

    def __init__(self, wh: Path, name: str = "in") -> None:
        self.root = wh / name
        self.next_id = 1
        self.files = 0
        self.mtime = 1_700_000_000
        self.last: dict[str, str] = {}
        """The newest file of each dataset (what its watermark must end at)."""

    def add(self, dataset: str, count: int) -> None:
        self.files += 1
        self.mtime += 10
        path = self.root / dataset / f"part-{self.files:05d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(self.next_id, self.next_id + count):
            amount = -1.0 if i % 7 == 0 else float(i)
            lines.append(json.dumps({"id": i, "day": f"2026-11-0{1 + i % 3}", "amount": amount}))
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (self.mtime, self.mtime))
        self.next_id += count
        self.last[dataset] = path.resolve().as_uri().replace("file:///", "file:/")

    @property
    def ids(self) -> list[int]:
        return list(range(1, self.next_id))

    @property
    def good(self) -> list[int]:
        return [i for i in self.ids if i % 7]

    @property
    def bad(self) -> list[int]:
        return [i for i in self.ids if i % 7 == 0]


def _argv(wh: Path | str, extra: list[str], job: str = JOB) -> list[str]:
    """``job`` is a job's name, or the choice of a flow as is (``flow=<group>/<name>``)."""
    return [job if job.startswith("flow=") else f"job={job}", f"warehouse={wh}", *extra]


def crash_run(
    jobs_dir: Path, wh: Path | str, *, kill_at: str, fail: str = "", extra: list[str] | None = None, timeout: int = 300
) -> Ended:
    """Run the job in a new driver process that kills itself (SIGKILL) at ``kill_at``."""
    return driver(jobs_dir, wh, kill_at=kill_at, fail=fail, extra=extra).communicate_result(timeout)


class _Driver(subprocess.Popen):  # type: ignore[type-arg]
    temp: Path
    """The driver's own temp folder (its ``TMPDIR`` and the JVM's ``java.io.tmpdir``): a driver killed
    with its JVM leaves Spark's folders there (a copy of the jars, the block manager's), removed once
    it has ended."""

    def communicate_result(self, timeout: int = 300) -> Ended:
        timed_out = False
        try:
            out, err = self.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)  # a hung driver (and its JVM) must not keep holding the job's lease
            out, err = self.communicate()
            timed_out = True
        left = sorted(p.name for p in self.temp.iterdir())
        shutil.rmtree(self.temp, ignore_errors=True)
        return Ended(self.args, self.returncode, out, err, left_behind=left, timed_out=timed_out)


class Ended(subprocess.CompletedProcess):  # type: ignore[type-arg]
    """A driver's end, and what it left in its temp folder (names): Spark's ``blockmgr-*`` there
    says its JVM was killed, not stopped (a stopped one deletes it). ``timed_out``: it was still
    running after the timeout, and the harness killed it (with its JVM)."""

    def __init__(
        self, args: Any, returncode: int, stdout: str, stderr: str, *, left_behind: list[str], timed_out: bool = False
    ) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.left_behind = left_behind
        self.timed_out = timed_out


def driver(
    jobs_dir: Path, wh: Path | str, *, kill_at: str = "", fail: str = "", extra: list[str] | None = None, job: str = JOB
) -> _Driver:
    """Start the job in a new driver process (``python main.py``, the cached jars, local[2])."""
    from engine.runtime.session import cached_class_path, cached_jars

    temp = Path(tempfile.mkdtemp(prefix="engine-driver-"))
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "ENGINE_JOBS_DIR": str(jobs_dir),
        "ENGINE_KILL_AT": kill_at,
        "ENGINE_FAIL_DATASETS": fail,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_SUBMIT_ARGS": (
            f"--master local[2] --driver-memory 1g --conf spark.ui.enabled=false {_java_options(temp)}"
            f"--jars {','.join(cached_jars(REPO))} --driver-class-path {':'.join(cached_class_path(REPO))} "
            "pyspark-shell"
        ),
    }
    proc = _Driver(
        [sys.executable, str(REPO / "main.py"), *_argv(wh, extra or [], job)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # it leads its group: killed at a point, its JVM dies with it (engine.hooks)
    )
    proc.temp = temp
    return proc


def _java_options(temp: Path) -> str:
    """The driver JVM's start as ``spark-submit.sh`` makes it, with the class archive an earlier
    run wrote (the most recent, when there is one: a JVM ignores one that does not fit it), and C1
    only: a crash run is a short job whose compiling C2 would not repay. Together they take a third
    off each driver's time."""
    from engine.platform.class_archive import most_recent

    archive = most_recent(REPO / ".cache" / "cds")
    opts = ["-XX:TieredStopAtLevel=1", f"-Djava.io.tmpdir={temp}"]
    if archive is not None and os.environ.get("ENGINE_CDS", "on") != "off":
        opts += [f"-XX:SharedArchiveFile={archive.resolve()}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    return f"--driver-java-options '{' '.join(opts)}' "


def run_here(
    jobs_dir: Path, wh: Path | str, *extra: str, fail: str = "", job: str = JOB, printed: list[str] | None = None
) -> tuple[int, dict[str, Any]]:
    """Run the job through the CLI entry in this process (the test session's Spark); ``printed``
    receives every line it wrote on stdout."""
    from engine.cli.app import run_task
    from engine.config import run_app

    saved = {k: os.environ.get(k) for k in ("ENGINE_JOBS_DIR", "ENGINE_FAIL_DATASETS", "ENGINE_KILL_AT")}
    os.environ["ENGINE_JOBS_DIR"] = str(jobs_dir)
    os.environ["ENGINE_FAIL_DATASETS"] = fail
    os.environ.pop("ENGINE_KILL_AT", None)
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    shuffle = session.conf.get("spark.sql.shuffle.partitions") if session else None
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = run_app(_argv(wh, list(extra), job), run_task)
    finally:
        if session is not None and shuffle is not None:  # the engine's Spark profile sets its own
            session.conf.set("spark.sql.shuffle.partitions", shuffle)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    lines = out.getvalue().strip().splitlines()
    if printed is not None:
        printed.extend(lines)
    return code, json.loads(lines[-1]) if lines else {}


# -- independent readers ------------------------------------------------------------------------


def _visible(root: Path, suffix: str) -> list[Path]:
    return sorted(
        p
        for p in root.rglob(f"*{suffix}")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    )


def sink_ids(wh: Path, name: str = JOB) -> dict[str, list[int]]:
    """Every sink's ids (sorted, duplicates kept), each read without Spark."""
    import fastavro
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    out: dict[str, list[int]] = {}
    root = wh / ("out" if name == JOB else f"out-{name}")
    lake = root / "lake"
    out["delta"] = sorted(DeltaTable(str(lake)).to_pyarrow_table().column("id").to_pylist()) if lake.exists() else []
    pq = root / "pq"
    out["parquet"] = (
        sorted(ds.dataset(str(pq), format="parquet", partitioning="hive").to_table().column("id").to_pylist())
        if _visible(pq, ".parquet")
        else []
    )
    avro_ids: list[int] = []
    for f in _visible(root / "av", ".avro"):
        with f.open("rb") as fh:
            avro_ids += [int(r["id"]) for r in fastavro.reader(fh)]  # type: ignore[index, arg-type, call-overload]
    out["avro"] = sorted(avro_ids)
    json_ids: list[int] = []
    for f in _visible(root / "js", ".json"):
        json_ids += [int(json.loads(line)["id"]) for line in f.read_text().splitlines() if line.strip()]
    out["json"] = sorted(json_ids)
    errors = wh / "_errors" / name
    out["errors"] = (
        sorted(json.loads(r)["id"] for r in DeltaTable(str(errors)).to_pyarrow_table().column("record").to_pylist())
        if (errors / "_delta_log").exists()
        else []
    )
    return out


def watermarks(wh: Path) -> dict[str, dict[str, Any]]:
    """The stored watermark of each dataset (newest row wins), read with delta-rs."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(wh / "_engine" / "state")).to_pyarrow_table().to_pylist()
    latest: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["committed_at"]):
        latest[r["dataset"]] = json.loads(r["watermark"])["value"]
    return latest


def check_exactly_once(wh: Path, inputs: Inputs, name: str = JOB) -> None:
    found = sink_ids(wh, name)
    for sink in ("delta", "parquet", "avro", "json"):
        assert found[sink] == inputs.good, f"{sink}: {_diff(found[sink], inputs.good)}"
    assert found["errors"] == inputs.bad, f"error table: {_diff(found['errors'], inputs.bad)}"
    marks = watermarks(wh)
    for dataset, path in inputs.last.items():
        urn = next((d for d in marks if d.rstrip("/").endswith(f"/{inputs.root.name}/{dataset}")), None)
        assert urn is not None, f"no watermark for {dataset}: {sorted(marks)}"
        assert marks[urn]["path"] == path, f"{dataset}: watermark at {marks[urn]['path']}, data ends at {path}"
    leftovers = list(wh.rglob("_engine_staging"))
    assert not leftovers, f"staging left behind: {leftovers}"


def _diff(found: list[int], want: list[int]) -> str:
    from collections import Counter

    have = Counter(found)
    dupes = sorted(i for i, n in have.items() if n > 1)
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    return f"{len(found)} rows; duplicates {dupes[:10]}, missing {missing[:10]}, unexpected {extra[:10]}"
