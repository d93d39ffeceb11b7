"""Randomized crash soak for the exactly-once publish protocol (not a pytest module).

Run from the repository root::

    .venv/bin/python -m tests.commit.soak [--runs 50] [--seed N] [--workdir DIR] [--policy full|partial|random]

One seeded soak writes the crash harness's job (:mod:`tests.commit.harness`) with one publish
policy, then runs it ``--runs`` times. Before each run 0-3 new input files arrive (datasets a, b
and c, 1-40 records each). About 60% of the runs are real driver processes (``python main.py``)
that SIGKILL themselves at a random kill point of the protocol (:mod:`engine.commit.killpoints`);
the rest run in this process through the CLI. Under ``partial`` some runs also have one dataset
fail mid-read. At the end the job runs without faults until a run reads nothing, and every sink
and the error table must hold each input record exactly once (read without Spark), with each
dataset's watermark at its newest file and no staging left behind.

What it proves: any interleaving of crashes (including crashes while recovering an earlier
crashed batch), new input and failing datasets converges to exactly-once output. A failure
prints the seed and the workdir; rerun with the same ``--seed`` to reproduce the same schedule.
Exit code 0 on success, 1 on any failed check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from tests.commit.harness import REPO, Inputs, check_exactly_once, driver, run_here, write_job

STEPS = 8  # the harness job's commit sequence: 4 sinks, error table, delete staging, file log, watermarks
POINTS = ["after_plan_saved", "after_staging", "after_sequence_written", "mid_step", "after_step"]
POINTS += ["before_state_saved", "before_done"]
DATASETS = ["a", "b", "c"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SoakFailure(Exception):
    pass


def kill_point(rng: random.Random) -> str:
    point = rng.choice(POINTS)
    return f"{point}:{rng.randint(1, STEPS)}" if point in ("mid_step", "after_step") else point


def crash(jobs: Path, wh: Path, point: str, fail: str, timeout: int) -> tuple[bool, int, str]:
    """A driver process told to die at ``point``: (killed there, exit code, what it reported)."""
    done = driver(jobs, wh, kill_at=point, fail=fail).communicate_result(timeout)  # a hung one: killed with its JVM
    if done.timed_out:
        raise SoakFailure(f"driver (kill at {point}) still running after {timeout}s")
    killed = done.returncode == -9 and f"killed at {point} " in done.stderr
    if done.returncode == -9 and not killed:
        raise SoakFailure(f"driver SIGKILLed but not at {point}:\n{done.stderr[-3000:]}")
    if not killed and done.returncode not in (0, 1):
        raise SoakFailure(f"driver (kill at {point}) exited {done.returncode}:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return killed, done.returncode, "" if killed or not lines else _brief(json.loads(lines[-1]))


def _brief(summary: dict[str, object]) -> str:
    return f"{summary.get('status')}, read {summary.get('records_read', '-')}"


def soak(args: argparse.Namespace) -> dict[str, object]:
    rng = random.Random(args.seed)
    policy = rng.choice(["full", "partial"]) if args.policy == "random" else args.policy
    wh, jobs = args.workdir / "wh", args.workdir / "jobs"
    write_job(jobs, wh, policy=policy)
    inputs = Inputs(wh)
    print(f"soak: seed {args.seed}, policy {policy}, workdir {args.workdir}", flush=True)
    started = time.monotonic()
    points: Counter[str] = Counter()
    for run in range(1, args.runs + 1):
        arrived = [(rng.choice(DATASETS), rng.randint(1, 40)) for _ in range(rng.randint(0, 3))]
        for dataset, count in arrived:
            inputs.add(dataset, count)
        new = ",".join(f"{d}+{n}" for d, n in arrived) or "none"
        fail = f"*/in/{rng.choice(DATASETS)}" if policy == "partial" and rng.random() < 0.3 else ""
        t0 = time.monotonic()
        if rng.random() < 0.6:
            point = kill_point(rng)
            killed, code, said = crash(jobs, wh, point, fail, args.timeout)
            points[point] += killed
            what = f"crash at {point}" + ("" if killed else f" (not reached: {said})")
        else:
            code, summary = run_here(jobs, wh, fail=fail)
            if code not in ((0, 1) if fail else (0,)):
                raise SoakFailure(f"in-process run exited {code}: {json.dumps(summary)[:3000]}")
            what = f"in-process ({_brief(summary)})"
        fault = f", failing {fail}" if fail else ""
        print(f"run {run:3d}: new {new}{fault}: {what}, exit {code}, {time.monotonic() - t0:.1f}s", flush=True)
    for final in range(1, 6):
        t0 = time.monotonic()
        code, summary = run_here(jobs, wh)
        print(f"final {final}: in-process ({_brief(summary)}), exit {code}, {time.monotonic() - t0:.1f}s", flush=True)
        if code == 0 and summary.get("records_read") == 0:
            break
    else:
        raise SoakFailure(f"no clean empty run after 5 tries; last: {json.dumps(summary)[:3000]}")
    try:
        check_exactly_once(wh, inputs)
    except AssertionError as exc:
        raise SoakFailure(f"not exactly once: {exc}") from None
    return {
        "runs": args.runs,
        "crashes": sum(points.values()),
        "kill_points": {p: n for p, n in sorted(points.items()) if n},
        "records": len(inputs.ids),
        "exactly_once": True,
        "seconds": round(time.monotonic() - started, 1),
    }


def spark_session() -> SparkSession:
    """The test suite's session (tests/conftest.py): run_here needs one in this process."""
    from engine.runtime.session import build_session, cached_class_path, cached_jars

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-memory 2g pyspark-shell")
    conf = {
        "spark.sql.shuffle.partitions": 2,
        "spark.default.parallelism": 2,
        "spark.ui.enabled": "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": 2,
        "spark.databricks.delta.snapshotPartitions": 2,
    }
    return build_session(
        "engine-soak", conf, master="local[2]", jars=cached_jars(REPO), class_path=cached_class_path(REPO)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.commit.soak", description="Randomized crash soak of the publish protocol."
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--workdir", type=Path, default=None, help="an empty or new directory (default: a temp dir)")
    parser.add_argument("--policy", choices=["full", "partial", "random"], default="random")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a driver process may take")
    args = parser.parse_args(argv)
    args.seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    if args.workdir is None:
        args.workdir = Path(tempfile.mkdtemp(prefix="engine-soak-"))
    elif args.workdir.exists() and any(args.workdir.iterdir()):
        print(f"soak FAILED: workdir {args.workdir} is not empty", file=sys.stderr)
        return 1
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    spark = spark_session()
    try:
        result = soak(args)
    except SoakFailure as exc:
        print(f"soak FAILED (seed {args.seed}, workdir {args.workdir}): {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
