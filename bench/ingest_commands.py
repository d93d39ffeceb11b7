"""Benchmark: the JSON -> Delta ingest as whole commands a user types, engine against hand-written.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/ingest_commands.py                         # 1M records, 3 rounds
    .venv/bin/python bench/ingest_commands.py --records 500000 2000000 --rounds 2

``bench/ingest_vs_handwritten.py`` times both sides inside one warm SparkSession; this one times
what a user waits for, each side a whole ``./spark-submit.sh`` process (the JVM start, the
compiling a fresh JVM does, planning, the writes, the stop), taking turns to go first:

- ``engine``: ``./spark-submit.sh job=<the bench's job> warehouse=<fresh dir>``, the job being
  ``ingest_vs_handwritten.engine_job`` (the demo's shape trimmed to what the hand side does), with
  the engine's real metadata (state, commit log, error table) in the warehouse;
- ``hand``: ``ingest_vs_handwritten.run_hand`` (unchanged) in an application submitted the same
  way (``ENGINE_APP=bench/handwritten_ingest.py``).

``--lookup`` runs ``lookup_vs_handwritten.py``'s work instead: the engine's job gains its
``lookup`` converter (each order enriched from the 50,000 customers' reference Delta table), the
hand side is its ``run_hand`` (``bench/handwritten_lookup.py``, a broadcast join), and every valid
order of both must have been enriched.

The input is ``ingest_vs_handwritten.py``'s generated data (cached under ``bench/out/data``). Both
sides' tables are read back with ``deltalake`` and must hold the generator's valid and rejected
counts. Reported per size: median seconds and user+system CPU seconds of the whole process tree,
and engine/hand as speed (hand seconds / engine seconds: 1.0 is as fast). Last line: one-line JSON;
exit 1 if a run failed or a count is wrong.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ingest_vs_handwritten import delta_rows, engine_job, ensure_data, rotated
from bench.lookup_vs_handwritten import enriched, ensure_reference

ROOT = Path(__file__).resolve().parents[1]
SUBMIT = str(ROOT / "spark-submit.sh")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def submit(args: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """``spark-submit.sh args``: (seconds, CPU seconds of its process tree, exit code, output tail)."""
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(
        ["bash", SUBMIT, *args], cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    tail = done.stdout.decode(errors="replace")[-2000:]
    return time.perf_counter() - started, children_cpu() - cpu, done.returncode, tail


SIDES = ("engine", "hand")


def medians(times: dict[str, list[tuple[float, float]]]) -> tuple[dict[str, float], dict[str, float], float, float]:
    """Each side's median seconds and CPU seconds, and engine/hand as speed by each."""
    median = {side: statistics.median(s for s, _ in t) for side, t in times.items()}
    cpu = {side: statistics.median(c for _, c in t) for side, t in times.items()}
    return median, cpu, median["hand"] / median["engine"], cpu["hand"] / cpu["engine"]


def command(
    side: str, data: Path, jobs: Path, out: Path, reference: Path | None = None
) -> tuple[list[str], dict[str, str], tuple[Path, Path]]:
    """A side's arguments and environment for ``spark-submit.sh``, and where its two tables land
    (``reference``: the lookup's work, ``--lookup``)."""
    if side == "engine":
        env = {"ENGINE_JOBS_DIR": str(jobs)}
        return ["job=bench_orders", f"warehouse={out}"], env, (out / "orders", out / "_errors" / "bench_orders")
    if reference is not None:
        env = {"ENGINE_APP": str(ROOT / "bench" / "handwritten_lookup.py")}
        return [str(data), str(reference), str(out)], env, (out / "orders", out / "_errors")
    env = {"ENGINE_APP": str(ROOT / "bench" / "handwritten_ingest.py")}
    return [str(data), str(out)], env, (out / "orders", out / "_errors")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, nargs="+", default=[1_000_000], help="input sizes (default 1,000,000)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per size (default 3)")
    p.add_argument("--lookup", action="store_true", help="each order enriched from a reference table (see above)")
    args = p.parse_args(argv)
    if args.rounds < 1 or min(args.records) < 100:
        p.error("--rounds must be >= 1 and --records >= 100")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="engine-ingest-commands-"))
    failures: list[str] = []
    summary: dict[str, dict[str, float]] = {}
    try:
        for records in args.records:
            data, manifest = ensure_data(records)
            jobs = work / "jobs"
            jobs.mkdir(exist_ok=True)
            job = engine_job(str(data), "DISK_ONLY")
            reference = ensure_reference() if args.lookup else None
            if reference is not None:
                job["converters"].append({"type": "lookup", "path": str(reference), "on": ["customer"]})
            (jobs / "bench_orders.conf").write_text(json.dumps(job))  # JSON is HOCON
            times: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
            for n in range(1, args.rounds + 1):
                for side in rotated(list(SIDES), n):
                    out = work / f"{side}-{records}-{n}"
                    argv_, env, (valid, errors) = command(side, data, jobs, out, reference)
                    secs, cpu, code, tail = submit(argv_, env)
                    counts = (delta_rows(valid), delta_rows(errors)) if code == 0 else (-1, -1)
                    want = (manifest["records"] - manifest["errors"], manifest["errors"])
                    if reference is not None and code == 0 and enriched(valid) != (want[0], want[0]):
                        counts = (-2, -2)  # an order without its region
                    print(
                        f"{records:>10,} round {n} {side:<6} {secs:7.2f}s  cpu {cpu:6.1f}s  exit {code}  "
                        f"valid={counts[0]:,} errors={counts[1]:,}",
                        flush=True,
                    )
                    if code != 0 or counts != want:
                        failures.append(f"{records} round {n} {side}: exit {code}, counts {counts} != {want}\n{tail}")
                    times[side].append((secs, cpu))
                    shutil.rmtree(out, ignore_errors=True)
            median, cpu, ratio, cpu_ratio = medians(times)
            print(
                f"{records:>10,} median: engine {median['engine']:.2f}s ({cpu['engine']:.1f} CPU-s), "
                f"hand {median['hand']:.2f}s ({cpu['hand']:.1f} CPU-s): engine/hand speed {ratio:.3f} by time, "
                f"{cpu_ratio:.3f} by CPU (goal >= {0.95 if args.lookup else 1.0})",
                flush=True,
            )
            summary[str(records)] = {
                "engine_seconds": round(median["engine"], 2),
                "hand_seconds": round(median["hand"], 2),
                "engine_cpu_seconds": round(cpu["engine"], 1),
                "hand_cpu_seconds": round(cpu["hand"], 1),
                "ratio": round(ratio, 3),
                "cpu_ratio": round(cpu_ratio, 3),
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    figures = {"rounds": args.rounds, "lookup": args.lookup, "sizes": summary, "runs_ok": not failures}
    print(json.dumps(figures), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
