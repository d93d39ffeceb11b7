"""Benchmark: many JobDags in one Spark application (the JobManager) against the alternatives.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/jobmanager.py                    # A: 20 x 5,000 records; B: 4 x 1M, 3 rounds
    .venv/bin/python bench/jobmanager.py --part a --dags 4 --small-records 1000         # quick check
    .venv/bin/python bench/jobmanager.py --part b --records 100000 --rounds 1           # quick check

Every DAG is the ingest benchmark's job (``bench/ingest_vs_handwritten.py``: JSON orders with 1%
bad rows, a DDL schema, require/cast/check/parse_timestamp/derive, valid rows to a Delta table,
rejects to the DAG's own error table).

A. ``--dags`` small DAGs (``--small-records`` each, one dataset per DAG, generated once under
   ``bench/out/data/jm-small-*``). Candidate: ONE job file holding every DAG under ``dags``, run by
   one ``./spark-submit.sh ... job.parallelism=2``. Baseline: one job file per DAG, run one after
   the other by its own ``./spark-submit.sh`` (what a cron table does today). Both use
   ``--master local[2] --driver-memory 2g --conf spark.ui.enabled=false``, job files in a temporary
   directory (``ENGINE_JOBS_DIR``) and a fresh warehouse per side (the baseline's runs share theirs,
   as cron runs would: its metadata tables are created once, not per run). One untimed
   ``mode=validate`` submit warms the page cache first. Measured: wall seconds of each side, from
   before the first process starts to after the last one exits. Goal: baseline/candidate >= 5.
B. ``4`` DAGs over the same ``--records`` dataset (``ensure_data`` of the ingest benchmark), one
   job, run in this process's SparkSession (``local[2]``) by ``JobManager`` with Delta metadata and
   run history, as the CLI does, with ``parallelism`` 1 and 2: one untimed warm-up, then
   ``--rounds`` rounds alternating the order (1,2 / 2,1 ...), each in a fresh warehouse. Only
   ``execute`` is timed (planning is serial either way). Reported: medians and the speed-up.

Both parts run ``HEAD``'s engine, copied first to ``bench/out/jobmanager/tree`` (``git archive``;
``.venv`` and ``.cache/jars`` shared, its ``bootstrap.sh`` emptied once the repository's has run), so
the sides run the same code while others commit. Run one instance at a time.

Each submit must exit 0 with a last stdout line (JSON) of status SUCCEEDED, each in-process run
must succeed, and every DAG's Delta tables are counted with ``deltalake`` (not Spark) against what
the generator wrote; any mismatch stops the benchmark (exit 1). Beside wall time, the CPU seconds
other processes used meanwhile are shown: on a 2-core machine a concurrent test suite skews the
figures. Engine logs of each submit are kept under ``bench/out/jobmanager/logs``. The last stdout
line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "jobmanager"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest_vs_handwritten import (  # noqa: E402  (needs ROOT on sys.path)
    BAD_EVERY,
    GENERATOR_VERSION,
    _write_file,
    cpu_clock,
    delta_rows,
    engine_job,
    ensure_data,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GOAL = 5.0
TREE = OUT / "tree"
TREE_PATHS = ("engine", "main.py", "spark-submit.sh", "scripts", "conf", "requirements.lock", "jvm-packages.txt")
SUBMIT_OPTS = ("--master", "local[2]", "--driver-memory", "2g", "--conf", "spark.ui.enabled=false")
CANDIDATE_JOB = "all"
B_DAGS = 4


class BenchFailed(Exception):
    """A run failed or wrote the wrong rows: its timing means nothing."""


# --------------------------------------------------------------------------- the code under test


def snapshot() -> str:
    """Copy HEAD's engine and launcher to ``TREE`` and import the engine from there: the sides run
    the same code even if the working tree changes meanwhile. Returns the commit."""
    subprocess.run(["bash", str(ROOT / "scripts" / "bootstrap.sh")], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    commit = head.stdout.strip()
    archive = subprocess.run(["git", "archive", commit, *TREE_PATHS], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(fresh(TREE))], input=archive.stdout, check=True)
    (TREE / ".venv").symlink_to(ROOT / ".venv")
    (TREE / ".cache").mkdir()
    (TREE / ".cache" / "jars").symlink_to(ROOT / ".cache" / "jars")
    # bootstrap.sh keys its stamps by absolute path: from the copy it would reinstall the shared .venv
    (TREE / "scripts" / "bootstrap.sh").write_text("#!/usr/bin/env bash\n# bench/jobmanager.py: done from the repo\n")
    sys.path.insert(0, str(TREE))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(TREE), os.environ.get("PYTHONPATH"))))
    return commit


# --------------------------------------------------------------------------- jobs and data


def dag_name(k: int) -> str:
    return f"d{k:02d}"


def expected(records: int) -> tuple[int, int]:
    """(valid, rejected) records of a generated file of ``records`` lines (see ``_bad_kind``)."""
    errors = len(range(7, records, BAD_EVERY))
    return records - errors, errors


def ensure_small(dags: int, records: int) -> dict[str, Path]:
    """Each DAG's directory with one JSON-lines file, generated once (``_done`` marks it complete)."""
    base = OUT.parent / "data" / f"jm-small-{records}-v{GENERATOR_VERSION}"
    inputs = {dag_name(k): base / dag_name(k) for k in range(1, dags + 1)}
    for k, folder in enumerate(inputs.values(), start=1):
        if not (folder / "_done").exists():  # the engine's listing skips names starting with _
            folder.mkdir(parents=True, exist_ok=True)
            _write_file(str(folder / "part-000.json"), 0, records, 5000 + k)
            (folder / "_done").write_text("")
    return inputs


def dag_conf(name: str, input_dir: Path) -> dict[str, Any]:
    """One DAG: the ingest benchmark's source and converters, its own Delta sink and error table."""
    job = engine_job(str(input_dir), "DISK_ONLY")
    return {
        "sources": job["sources"],
        "converters": job["converters"],
        "sinks": {"lake": {"type": "delta", "from": "valid", "path": f"{name}/orders"}},
        "errors": {"path": f"_errors/{name}"},
    }


def multi_dag_job(name: str, inputs: dict[str, Path], parallelism: int) -> dict[str, Any]:
    dags = {dag: dag_conf(dag, folder) for dag, folder in inputs.items()}
    return {"name": name, "parallelism": parallelism, "dags": dags}


def check_tables(warehouse: Path, dags: list[str], want: tuple[int, int]) -> None:
    """Every DAG's sink and error table hold exactly the generator's counts (read with deltalake)."""
    for dag in dags:
        got = (delta_rows(warehouse / dag / "orders"), delta_rows(warehouse / "_errors" / dag))
        if got != want:
            raise BenchFailed(f"{warehouse}: dag {dag} wrote valid/errors {got}, expected {want}")


# --------------------------------------------------------------------------- CPU accounting


def cpu_now() -> tuple[float, float]:
    """(machine CPU seconds, this process tree's): live children (a JVM) and waited-for ones (submits)."""
    machine, own = cpu_clock() or (0.0, 0.0)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return machine, own + waited.ru_utime + waited.ru_stime


@dataclass
class Timer:
    """Wall seconds, and the CPU seconds other processes used meanwhile (Linux; 0 elsewhere)."""

    seconds: float = 0.0
    other_cpu: float = 0.0
    _start: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0), repr=False)

    def __enter__(self) -> Timer:
        self._start = (time.perf_counter(), *cpu_now())
        return self

    def __exit__(self, *exc: object) -> None:
        machine, own = cpu_now()
        self.seconds = time.perf_counter() - self._start[0]
        self.other_cpu = max(0.0, (machine - self._start[1]) - (own - self._start[2]))


# --------------------------------------------------------------------------- A: one submit vs N


@dataclass
class Submit:
    job: str
    seconds: float
    summary: dict[str, Any]


def submit(job: str, jobs_dir: Path, warehouse: Path, *overrides: str) -> Submit:
    """``./spark-submit.sh`` once; raises unless it exits 0 with a SUCCEEDED (or VALID) summary."""
    cmd = ["./spark-submit.sh", *SUBMIT_OPTS, f"job={job}", f"warehouse={warehouse}", *overrides]
    log = OUT / "logs" / f"{warehouse.parent.name}-{warehouse.name}-{job}.log"
    env = {**os.environ, "ENGINE_JOBS_DIR": str(jobs_dir)}
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=TREE, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    log.write_text(f"$ {' '.join(cmd)}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        summary = {}
    if done.returncode != 0 or summary.get("status") not in ("SUCCEEDED", "VALID"):
        raise BenchFailed(f"job {job}: exit {done.returncode}, status {summary.get('status')}; see {log}")
    return Submit(job, seconds, summary)


def write_jobs(jobs_dir: Path, inputs: dict[str, Path]) -> list[str]:
    """The candidate's one job file and the baseline's one file per DAG (HOCON accepts JSON)."""
    candidate = multi_dag_job(f"bench_jm_{CANDIDATE_JOB}", inputs, 2)
    (jobs_dir / f"{CANDIDATE_JOB}.conf").write_text(json.dumps(candidate, indent=2))
    for dag, folder in inputs.items():
        single = {"name": f"bench_jm_{dag}", **dag_conf(dag, folder)}
        (jobs_dir / f"{dag}.conf").write_text(json.dumps(single, indent=2))
    return list(inputs)


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def run_candidate(jobs_dir: Path, dags: list[str], want: tuple[int, int]) -> tuple[Timer, Submit]:
    warehouse = fresh(OUT / "a" / "candidate")
    with Timer() as timer:
        run = submit(CANDIDATE_JOB, jobs_dir, warehouse, "job.parallelism=2")
    check_tables(warehouse, dags, want)
    return timer, run


def run_baseline(jobs_dir: Path, dags: list[str], want: tuple[int, int]) -> tuple[Timer, list[Submit]]:
    warehouse = fresh(OUT / "a" / "baseline")
    with Timer() as timer:
        runs = [submit(dag, jobs_dir, warehouse) for dag in dags]
    check_tables(warehouse, dags, want)
    return timer, runs


def engine_seconds(runs: list[Submit]) -> tuple[float, float]:
    """Summed ``seconds`` (the run after Python started) and ``execute_seconds`` (running the DAGs)."""
    return (
        sum(r.summary.get("seconds", 0.0) for r in runs),
        sum(r.summary.get("execute_seconds", 0.0) for r in runs),
    )


def part_a(args: argparse.Namespace) -> dict[str, Any]:
    inputs = ensure_small(args.dags, args.small_records)
    want = expected(args.small_records)
    fresh(OUT / "logs")
    print(f"A: {args.dags} DAGs x {args.small_records:,} records (valid {want[0]:,}, errors {want[1]:,}), local[2]")
    with tempfile.TemporaryDirectory(prefix="bench-jm-jobs-") as tmp:
        dags = write_jobs(Path(tmp), inputs)
        submit(CANDIDATE_JOB, Path(tmp), fresh(OUT / "a" / "warmup"), "mode=validate")  # untimed warm-up
        cand, cand_run = run_candidate(Path(tmp), dags, want)
        print_side(f"candidate, 1 submit of {len(dags)} DAGs, parallelism 2", cand, [cand_run])
        base, base_runs = run_baseline(Path(tmp), dags, want)
        print_side(f"baseline, {len(dags)} submits of 1 DAG", base, base_runs)
    if not args.keep_output:
        shutil.rmtree(OUT / "a", ignore_errors=True)
    return report_a(args, cand, cand_run, base, base_runs)


def print_side(label: str, timer: Timer, runs: list[Submit]) -> None:
    walls = [r.seconds for r in runs]
    seconds, execute = engine_seconds(runs)
    spread = f" (min {min(walls):.1f}, max {max(walls):.1f})" if len(runs) > 1 else ""
    print(
        f"  {label}: {timer.seconds:.1f} s wall, {statistics.mean(walls):.1f} s per submit{spread}\n"
        f"    = before the run (JVM, Python, Hydra) {timer.seconds - seconds:.1f} s + session and planning "
        f"{seconds - execute:.1f} s + executing DAGs {execute:.1f} s; other processes used {timer.other_cpu:.0f} CPU-s",
        flush=True,
    )


def report_a(args: argparse.Namespace, cand: Timer, run: Submit, base: Timer, runs: list[Submit]) -> dict[str, Any]:
    ratio = base.seconds / cand.seconds
    print(
        f"  ratio baseline/candidate = {ratio:.2f}x (goal >= {GOAL:g}x: {'MET' if ratio >= GOAL else 'NOT MET'})\n"
        f"  check: every submit exited 0 with status SUCCEEDED; every DAG's tables (deltalake) hold the "
        f"expected rows -> OK"
    )
    warned(cand.other_cpu + base.other_cpu, cand.seconds + base.seconds)
    return {
        "dags": args.dags,
        "records": args.small_records,
        "candidate_s": round(cand.seconds, 2),
        "candidate_execute_s": run.summary.get("execute_seconds"),
        "baseline_s": round(base.seconds, 2),
        "baseline_per_run_s": round(statistics.mean(r.seconds for r in runs), 2),
        "ratio": round(ratio, 2),
        "goal_met": ratio >= GOAL,
        "other_cpu_s": round(cand.other_cpu + base.other_cpu),
    }


def warned(other_cpu: float, seconds: float) -> None:
    if other_cpu > 0.05 * seconds:
        print(f"  warning: other processes used {other_cpu:.0f} CPU-s meanwhile: the figures are noisy")


# --------------------------------------------------------------------------- B: parallelism 1 vs 2


@dataclass
class BRound:
    parallelism: int
    plan_seconds: float
    timer: Timer
    dag_seconds: list[float]


def plan_b(spark: SparkSession, warehouse: Path, inputs: dict[str, Path], parallelism: int) -> tuple[Any, ...]:
    """What the CLI does before ``execute``: compile, plan, create the metadata tables."""
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state.delta_runs import DeltaRunStore
    from engine.state.delta_store import DeltaMetadataStore

    spec = compile_job(multi_dag_job("bench_jm_b", inputs, parallelism), name="b", file=None, warehouse=str(warehouse))
    store = DeltaMetadataStore(spark, str(warehouse / "_engine"))
    manager = JobManager(spark, store)
    planned = manager.plan(spec, f"bench-{warehouse.name}")
    store.ensure()
    return manager, planned, DeltaRunStore(spark, str(warehouse / "_engine" / "runs")).ensure()


def run_b(spark: SparkSession, data_dir: Path, parallelism: int, want: tuple[int, int]) -> BRound:
    """Plan, then time ``execute`` of the 4-DAG job at ``parallelism``, in a fresh warehouse."""
    warehouse = fresh(OUT / "b" / f"p{parallelism}-{uuid.uuid4().hex[:6]}")
    inputs = {dag_name(k): data_dir for k in range(1, B_DAGS + 1)}
    started = time.perf_counter()
    manager, planned, runs = plan_b(spark, warehouse, inputs, parallelism)
    plan_seconds = time.perf_counter() - started
    with Timer() as timer:
        result = manager.execute(planned, runs)
    if result.status != "SUCCEEDED":
        raise BenchFailed(f"parallelism {parallelism}: {result.summary()}")
    check_tables(warehouse, list(inputs), want)
    shutil.rmtree(warehouse, ignore_errors=True)
    return BRound(parallelism, plan_seconds, timer, [d.seconds for d in result.dags])


def show_b(label: str, r: BRound) -> None:
    dags = " ".join(f"{s:.1f}" for s in r.dag_seconds)
    print(
        f"  {label:>8}  parallelism {r.parallelism}: execute {r.timer.seconds:6.1f} s  (plan {r.plan_seconds:.1f} s; "
        f"each DAG before publishing {dags} s; other processes {r.timer.other_cpu:.0f} CPU-s)",
        flush=True,
    )


def part_b(args: argparse.Namespace) -> dict[str, Any]:
    from bench.session import start_spark

    data_dir, manifest = ensure_data(args.records)
    want = (manifest["valid"], manifest["errors"])
    print(f"B: {B_DAGS} DAGs x {args.records:,} records (valid {want[0]:,}, errors {want[1]:,}), local[2], in-process")
    fair = {"spark.scheduler.mode": "FAIR"}  # as the CLI starts it (engine.runtime.session.fair_pools)
    spark = start_spark("bench-jobmanager", {"spark.databricks.delta.snapshotPartitions": "2", **fair})
    spark.sparkContext.setLogLevel("ERROR")
    show_b("warm-up", run_b(spark, data_dir, 2, want))
    rounds: list[BRound] = []
    for n in range(args.rounds):
        for p in (1, 2) if n % 2 == 0 else (2, 1):
            rounds.append(run_b(spark, data_dir, p, want))
            show_b(f"round {n + 1}", rounds[-1])
    spark.stop()
    shutil.rmtree(OUT / "b", ignore_errors=True)
    return report_b(args, rounds)


def report_b(args: argparse.Namespace, rounds: list[BRound]) -> dict[str, Any]:
    med = {p: statistics.median(r.timer.seconds for r in rounds if r.parallelism == p) for p in (1, 2)}
    speedup = med[1] / med[2]
    print(
        f"  median execute: parallelism 1 {med[1]:.1f} s, parallelism 2 {med[2]:.1f} s -> speed-up {speedup:.2f}x\n"
        f"  check: every run SUCCEEDED; every DAG's tables (deltalake) hold the expected rows -> OK"
    )
    other = sum(r.timer.other_cpu for r in rounds)
    warned(other, sum(r.timer.seconds for r in rounds))
    return {
        "dags": B_DAGS,
        "records": args.records,
        "rounds": args.rounds,
        "p1_s": [round(r.timer.seconds, 2) for r in rounds if r.parallelism == 1],
        "p2_s": [round(r.timer.seconds, 2) for r in rounds if r.parallelism == 2],
        "speedup": round(speedup, 2),
        "other_cpu_s": round(other),
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("a", "b", "all"), default="all", help="which claim (default: both)")
    p.add_argument("--dags", type=int, default=20, help="A: small DAGs (default 20)")
    p.add_argument("--small-records", type=int, default=5000, help="A: records per small DAG (default 5,000)")
    p.add_argument("--records", type=int, default=1_000_000, help="B: records per medium DAG (default 1,000,000)")
    p.add_argument("--rounds", type=int, default=3, help="B: timed rounds per parallelism (default 3)")
    p.add_argument("--keep-output", action="store_true", help="A: keep the warehouses under bench/out/jobmanager")
    args = p.parse_args(argv)
    if not 1 <= args.dags <= 99 or min(args.small_records, args.records) < BAD_EVERY or args.rounds < 1:
        p.error("--dags must be 1..99, --small-records and --records >= 100, --rounds >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures: dict[str, Any] = {"bench": "jobmanager", "commit": snapshot()}
    print(f"engine: commit {figures['commit']} (copied to {TREE.relative_to(ROOT)})")
    try:
        if args.part in ("a", "all"):
            figures["a"] = part_a(args)
        if args.part in ("b", "all"):
            figures["b"] = part_b(args)
    except BenchFailed as exc:
        print(f"FAILED: {exc}", flush=True)
        return 1
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
