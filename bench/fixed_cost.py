"""Benchmark: what a run costs besides its data, as whole commands a user types.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/fixed_cost.py              # 3 alternating rounds (~7 min)
    .venv/bin/python bench/fixed_cost.py --rounds 6

Each round times three whole processes, one after the other, each started by ``spark-submit.sh``
(its bootstrap check, the JVM start, the driver, the stop included):

- ``empty``: an empty PySpark application (``bench/empty_app.py``: the engine's session, then stop),
  submitted the same way (``ENGINE_APP``): the floor no run can go under;
- ``nothing``: the demo job (``job=demo/orders``) on a warehouse it has already run on, with no
  new input: the run plans, finds nothing to read, and records that;
- ``first``: the demo job on a fresh warehouse: creates its tables, reads the demo's 48 records,
  publishes them;
- ``hand``: the demo's work written by hand in PySpark (``bench/handwritten_demo.py``: the same read,
  checks, dedupe and writes, none of the engine's state or commit log) on a fresh warehouse,
  submitted the same way: what a first run costs without the engine on the same cold JVM;
- ``floor``: the least a first run can do (``bench/minimal_delta_app.py``: read the demo's records,
  append them to a new Delta table, nothing else), submitted the same way: what one Delta write
  costs on a cold JVM, which no first run on this platform can go under.

``spark-submit.sh`` starts the driver JVM on the class archive a run with ``ENGINE_CDS=train``
wrote (``.cache/cds/``, the test command writes one); the bench says whether it is there.
``--compare-cds`` also times the first three with ``ENGINE_CDS=off`` in the same rounds, to show
what the archive saves.

Goals: ``nothing - empty <= 1.5 s`` and ``first - empty <= 4 s``, medians of the rounds; the bench
also prints ``first / hand`` and how far over the floor the first run is. Every run must exit 0;
each first run's Delta table, the engine's and the hand-written one's (read back with
``deltalake``), must hold the demo's valid records, and the floor's all 48 of them.
The last line on stdout is a one-line JSON of the figures. Exit code: 0 ok, 1 a run failed or wrote something else.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBMIT = str(ROOT / "spark-submit.sh")
GOALS = {"nothing": 1.5, "first": 4.0}
"""Seconds over the empty application each may take."""
DEMO_VALID = 40
"""Rows of the demo's Delta table after its first run (jobs/demo/data/orders.json, deduplicated)."""
DEMO_RECORDS = 48
"""Lines of jobs/demo/data/orders.json: the rows the floor (``bench/minimal_delta_app.py``) appends."""


def submit(args: list[str], *, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Run ``spark-submit.sh args``: (seconds, exit code, the end of its output)."""
    started = time.perf_counter()
    done = subprocess.run(
        ["bash", SUBMIT, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return time.perf_counter() - started, done.returncode, done.stdout[-2000:]


def delta_rows(path: Path) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).to_pyarrow_dataset().count_rows())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--compare-cds", action="store_true", help="also time each run without the class archive")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="engine-fixed-cost-"))
    empty_env = {"ENGINE_APP": str(ROOT / "bench" / "empty_app.py")}
    hand_env = {"ENGINE_APP": str(ROOT / "bench" / "handwritten_demo.py")}
    floor_env = {"ENGINE_APP": str(ROOT / "bench" / "minimal_delta_app.py")}
    kept = work / "kept"  # the warehouse the "nothing to do" runs find already up to date

    def demo(warehouse: Path, env: dict[str, str] | None = None) -> tuple[float, int, str]:
        return submit(["job=demo/orders", f"warehouse={warehouse}"], env=env)

    archives = sorted((ROOT / ".cache" / "cds").glob("*.jsa"), key=lambda a: a.stat().st_mtime)
    print(f"class archive: {archives[-1] if archives else 'none (ENGINE_CDS=train writes one)'}")
    off = {"ENGINE_CDS": "off"}

    failures: list[str] = []
    try:
        for what, (secs, code, out) in (("warm-up (empty)", submit([], env=empty_env)), ("warm-up (demo)", demo(kept))):
            print(f"{what:>16} {secs:6.2f}s exit {code}", flush=True)
            if code != 0:
                failures.append(f"{what}: exit {code}\n{out}")
        times: dict[str, list[float]] = {}
        for n in range(1, args.rounds + 1):
            fresh = work / f"fresh-{n}"
            runs = {
                "empty": lambda: submit([], env=empty_env),
                "nothing": lambda: demo(kept),
                "first": lambda fresh=fresh: demo(fresh),  # type: ignore[misc]
                "hand": lambda fresh=fresh: submit(  # type: ignore[misc]
                    [str(work / f"{fresh.name}-hand")], env=hand_env
                ),
                "floor": lambda fresh=fresh: submit(  # type: ignore[misc]
                    [str(work / f"{fresh.name}-floor")], env=floor_env
                ),
            }
            if args.compare_cds:
                runs.update(
                    {
                        "empty-nocds": lambda: submit([], env={**empty_env, **off}),
                        "nothing-nocds": lambda: demo(kept, off),
                        "first-nocds": lambda fresh=fresh: demo(work / f"{fresh.name}-nocds", off),  # type: ignore[misc]
                    }
                )
            for what, run in runs.items():
                secs, code, out = run()
                times.setdefault(what, []).append(secs)
                print(f"{f'round {n}':>8} {what:<13} {secs:6.2f}s exit {code}", flush=True)
                if code != 0:
                    failures.append(f"round {n} {what}: exit {code}\n{out}")
            for made in (fresh, work / f"{fresh.name}-nocds", work / f"{fresh.name}-hand"):
                if (made / "orders").exists() and (rows := delta_rows(made / "orders")) != DEMO_VALID:
                    failures.append(f"round {n}: the first run's table holds {rows} rows, not {DEMO_VALID}")
                shutil.rmtree(made, ignore_errors=True)
            floor = work / f"{fresh.name}-floor"
            if (rows := delta_rows(floor / "orders")) != DEMO_RECORDS:
                failures.append(f"round {n}: the floor's table holds {rows} rows, not {DEMO_RECORDS}")
            shutil.rmtree(floor, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    median = {what: statistics.median(t) for what, t in times.items()}
    over = {what: median[what] - median["empty"] for what in GOALS}
    for what, goal in GOALS.items():
        verdict = "met" if over[what] <= goal else "NOT met"
        print(
            f"median {what:<8} {median[what]:6.2f}s = empty {median['empty']:.2f}s + {over[what]:.2f}s "
            f"(goal <= +{goal:.1f}s: {verdict})"
        )
    by_hand = median["first"] / median["hand"]
    print(f"median first    {median['first']:6.2f}s = hand-written first run {median['hand']:.2f}s x {by_hand:.2f}")
    floor_over = median["floor"] - median["empty"]
    print(
        f"median floor    {median['floor']:6.2f}s = empty {median['empty']:.2f}s + {floor_over:.2f}s "
        f"(one Delta append on a cold JVM); first run = floor + {median['first'] - median['floor']:.2f}s"
    )
    saved = {w: median[f"{w}-nocds"] / median[w] for w in ("empty", "nothing", "first") if f"{w}-nocds" in median}
    for what, ratio in saved.items():
        print(f"median {what:<8} without the class archive {median[f'{what}-nocds']:6.2f}s: {ratio:.2f}x slower")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    summary = {
        "rounds": args.rounds,
        **{f"{what.replace('-', '_')}_seconds": [round(s, 2) for s in t] for what, t in times.items()},
        **{f"{what}_over_empty": round(over[what], 2) for what in GOALS},
        "first_over_hand": round(by_hand, 2),
        "floor_over_empty": round(floor_over, 2),
        "first_over_floor": round(median["first"] - median["floor"], 2),
        **{f"{what}_nocds_over_cds": round(ratio, 2) for what, ratio in saved.items()},
        "runs_ok": not failures,
    }
    print(json.dumps(summary), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
