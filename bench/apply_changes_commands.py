"""Benchmark: a change batch applied to a Delta table as whole commands a user types, the engine's
``mode = apply_changes`` against a MERGE written by hand.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/apply_changes_commands.py                  # 1M rows, 200k events, 3 rounds
    .venv/bin/python bench/apply_changes_commands.py --rows 200000 --events 50000 --rounds 2

``bench/apply_changes_vs_handwritten.py`` times both sides inside one warm SparkSession; this one
times what a user waits for, each side a whole ``./spark-submit.sh`` process (the JVM start, the
compiling a fresh JVM does, planning, the MERGE, the stop), the sides taking turns to go first:

- ``engine``: ``./spark-submit.sh job=bench_cdc warehouse=<dir>``, the job being
  ``apply_changes_vs_handwritten.engine_job`` (kept tombstones and the error table unless
  ``--no-tombstones`` / ``--no-error-table``), with the engine's real metadata in the warehouse;
- ``hand``: ``apply_changes_vs_handwritten.run_hand`` (unchanged) in an application submitted the
  same way (``ENGINE_APP=bench/handwritten_apply_changes.py``).

Each run starts from a copy of the same table (with the tombstones of earlier batches, written by
Spark's Delta: that bench's data). Both tables are read back with ``deltalake`` and must hold the
same rows. Reported: median seconds and user+system CPU seconds of the whole process tree, and
engine/hand as speed (hand seconds / engine seconds: 1.0 is as fast). Last line: one-line JSON;
exit 1 if a run failed or the tables differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.apply_changes_vs_handwritten import committed_by_spark, engine_job, ensure_data, fingerprint
from bench.ingest_commands import ROOT, medians, submit
from bench.ingest_vs_handwritten import rotated


def command(side: str, events: Path, jobs: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    """A side's arguments and environment for ``spark-submit.sh`` (the table is ``out/customers``)."""
    if side == "engine":
        return ["job=bench_cdc", f"warehouse={out}"], {"ENGINE_JOBS_DIR": str(jobs)}
    return [str(events), str(out)], {"ENGINE_APP": str(ROOT / "bench" / "handwritten_apply_changes.py")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3, help="rounds, the sides taking turns to go first (default 3)")
    p.add_argument("--no-tombstones", action="store_true", help="the engine keeps no tombstones")
    p.add_argument("--no-error-table", action="store_true", help="the engine keeps no error table")
    args = p.parse_args(argv)
    base, events = ensure_data(args.rows, args.events)
    from bench.session import start_spark

    spark = start_spark()  # only to have the table written by Spark's Delta once (untimed)
    base = committed_by_spark(spark, base)
    spark.stop()
    work = Path(tempfile.mkdtemp(prefix="engine-apply-changes-commands-"))
    jobs = work / "jobs"
    jobs.mkdir()
    job = engine_job(events, tombstones=not args.no_tombstones, error_table=not args.no_error_table)
    (jobs / "bench_cdc.conf").write_text(json.dumps(job))  # JSON is HOCON
    times: dict[str, list[tuple[float, float]]] = {"engine": [], "hand": []}
    failures: list[str] = []
    prints: set[tuple[int, str]] = set()
    try:
        for n in range(1, args.rounds + 1):
            for side in rotated(list(times), n):
                out = work / f"{side}-{n}"
                shutil.copytree(base, out / "customers")
                argv_, env = command(side, events, jobs, out)
                secs, cpu, code, tail = submit(argv_, env)
                rows, digest = fingerprint(out / "customers") if code == 0 else (-1, "")
                print(f"round {n} {side:<6} {secs:7.2f}s  cpu {cpu:6.1f}s  exit {code}  rows={rows:,} hash={digest}")
                if code != 0:
                    failures.append(f"round {n} {side}: exit {code}\n{tail}")
                prints.add((rows, digest))
                times[side].append((secs, cpu))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(prints) != 1:
        failures.append(f"the sides' tables differ: {sorted(prints)}")
    median, cpu, ratio, cpu_ratio = medians(times)
    print(
        f"median: engine {median['engine']:.2f}s ({cpu['engine']:.1f} CPU-s), hand {median['hand']:.2f}s "
        f"({cpu['hand']:.1f} CPU-s): engine/hand speed {ratio:.3f} by time, {cpu_ratio:.3f} by CPU (goal >= 0.9)"
    )
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    summary = {
        "rows": args.rows,
        "events": args.events,
        "rounds": args.rounds,
        "engine_seconds": [round(s, 2) for s, _ in times["engine"]],
        "hand_seconds": [round(s, 2) for s, _ in times["hand"]],
        "ratio": round(ratio, 3),
        "cpu_ratio": round(cpu_ratio, 3),
        "engine_tombstones": not args.no_tombstones,
        "engine_error_table": not args.no_error_table,
        "runs_ok": not failures,
    }
    print(json.dumps(summary), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
