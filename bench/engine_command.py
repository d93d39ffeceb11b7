"""Benchmark: what the ``engine`` command's driver class archive saves, as whole commands.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/engine_command.py              # 3 alternating rounds (~2 min)
    .venv/bin/python bench/engine_command.py --rounds 6

The ``engine`` command of a pip install (:mod:`engine.cli.launch`) is run here as
``.venv/bin/python -c 'from engine.cli.launch import main; main()' ...`` with a fresh user cache
(``ENGINE_CACHE``) and the demo job, as whole processes (JVM start and exit included):

- ``training``: the first run on that cache, asked to write the class archive
  (``ENGINE_CDS=train``): the demo's first run, whose JVM writes it as it exits;
- then, alternately, with the archive and with ``ENGINE_CDS=off``: the demo's first run on a
  fresh warehouse (``first``), and a run with nothing to do on a warehouse it ran on (``nothing``).

Every run must exit 0 with a SUCCEEDED summary. Prints the medians and what the archive saves; the
last line on stdout is a one-line JSON of the figures.
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
ENGINE = [sys.executable, "-c", "from engine.cli.launch import main; main()", "--master", "local[2]"]


def engine(warehouse: Path, env: dict[str, str]) -> float:
    """One ``engine job=demo/orders`` process: its seconds; exits if it fails."""
    started = time.perf_counter()
    done = subprocess.run(
        [*ENGINE, "job=demo/orders", f"warehouse={warehouse}", "progress=off"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    seconds = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if done.returncode != 0 or summary.get("status") != "SUCCEEDED":
        sys.exit(f"engine failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="engine-command-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env |= {"ENGINE_CACHE": str(work / "cache"), "SPARK_LOCAL_IP": "127.0.0.1"}
    try:
        training = engine(work / "wh-training", env | {"ENGINE_CDS": "train"})
        archives = list((work / "cache" / "cds").glob("*.jsa"))
        print(
            f"training run: {training:.2f}s, archive: {archives[0].stat().st_size / 2**20:.0f} MiB"
            if archives
            else f"training run: {training:.2f}s, NO archive written"
        )
        sides = {"archive": env, "off": env | {"ENGINE_CDS": "off"}}
        times: dict[str, list[float]] = {f"{kind} {side}": [] for kind in ("first", "nothing") for side in sides}
        for n in range(1, args.rounds + 1):
            for side, side_env in sides.items():
                wh = work / f"wh-{side}-{n}"
                first, nothing = engine(wh, side_env), engine(wh, side_env)
                times[f"first {side}"].append(first)
                times[f"nothing {side}"].append(nothing)
                print(f"round {n} {side:<8} first {first:6.2f}s  nothing {nothing:6.2f}s", flush=True)
                shutil.rmtree(wh, ignore_errors=True)
        median = {k: statistics.median(v) for k, v in times.items()}
        for kind in ("first", "nothing"):
            on, off = median[f"{kind} archive"], median[f"{kind} off"]
            print(f"median {kind:<8} archive {on:6.2f}s  off {off:6.2f}s  saves {off - on:5.2f}s ({off / on:.2f}x)")
        summary = {
            "rounds": args.rounds,
            "training_seconds": round(training, 2),
            "archive_written": bool(archives),
            **{k.replace(" ", "_") + "_seconds": round(v, 2) for k, v in median.items()},
        }
        print(json.dumps(summary), flush=True)
        return 0 if archives else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
