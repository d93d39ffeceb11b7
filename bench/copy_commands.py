"""Benchmark: copy jobs as whole commands a user types, beside ``cp -r`` and ``rsync -a``.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/copy_commands.py                          # both trees, 3 rounds
    .venv/bin/python bench/copy_commands.py --tree small --small-files 2000 --rounds 1

``bench/copy_files.py`` times the engine's copy inside one warm SparkSession; this one times what
a user waits for: ``./spark-submit.sh job=<copy job> warehouse=<dir>`` as a whole process (the
wrapper's checks, the JVM start, planning, copying, publishing, the stop). The source trees are
``copy_files.py``'s (same options, same cached files under ``--dir``).

Per tree and round, in an order that rotates each round, each into a destination removed first:

- ``cp``: ``cp -r <src> <dst>``;
- ``rsync``: ``rsync -a <src>/ <dst>/`` (installed with ``apt-get`` if missing and this runs as
  root; otherwise reported as unavailable);
- ``engine``: the copy job ``copy { source = <src>, target = <dst> }`` with a fresh warehouse;

then, untimed order aside, ``rerun``: the same engine command again with nothing changed, and
``rsync again``, rsync's own no-change run. Before each timed command: ``sync``, and the page cache
dropped by ``--cache`` as in ``copy_files.py``.

Checks (a failure exits 1): every command exits 0; every destination holds exactly the source's
paths and sizes (nothing left in the engine's staging) and a sample of files has the source's
sha256. Reported: seconds per command, medians, and the ratios engine/cp, engine/rsync (time: 1.0
is as fast, 2.0 twice as long) and rerun/rsync-again. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.copy_files import BenchFailed, Tree, add_tree_options, check_copy, cool, ensure_tree  # noqa: E402

SUBMIT = str(ROOT / "spark-submit.sh")
JOB = "copybench"


def ensure_rsync() -> str | None:
    """The rsync binary, installed from Debian's packages if missing and permitted; or ``None``."""
    found = shutil.which("rsync")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    print("rsync is not installed: apt-get install rsync", flush=True)
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300", "rsync"]
    if subprocess.run(install, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
        subprocess.run(install, capture_output=True, check=False)
    return shutil.which("rsync")


def write_job(jobs: Path, tree: Tree, dst: Path) -> None:
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{JOB}.conf").write_text(f'name = {JOB}\ncopy {{\n  source = "{tree.src}"\n  target = "{dst}"\n}}\n')


def timed(cmd: list[str], *, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchFailed(f"{' '.join(cmd)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds, done.stdout + done.stderr


def one_round(tree: Tree, work: Path, rsync: str | None, n: int, args: argparse.Namespace) -> dict[str, float]:
    """Seconds of each command of round ``n`` (whose order rotates with ``n``)."""
    rng = random.Random(n)
    sides = ["cp", "rsync", "engine"] if rsync else ["cp", "engine"]
    sides = sides[n % len(sides) :] + sides[: n % len(sides)]
    out: dict[str, float] = {}
    work.mkdir(parents=True, exist_ok=True)
    if n == 1:
        print(f"  page cache before each command: {cool(args.cache, tree)}", flush=True)
    for side in sides:
        dst = work / f"dst-{tree.name}-{side}"
        shutil.rmtree(dst, ignore_errors=True)
        if side == "engine":
            warehouse, jobs = work / f"wh-{tree.name}", work / "jobs"
            shutil.rmtree(warehouse, ignore_errors=True)
            write_job(jobs, tree, dst)
            env = {"ENGINE_JOBS_DIR": str(jobs)}
            command = ["bash", SUBMIT, f"job={JOB}", f"warehouse={warehouse}"]
            cool(args.cache, tree)
            out["engine"], _ = timed(command, env=env)
            check_copy(tree, dst, rng)
            cool(args.cache, tree)
            out["rerun"], _ = timed(command, env=env)
            check_copy(tree, dst, rng)
        elif side == "rsync":
            assert rsync is not None
            cool(args.cache, tree)
            out["rsync"], _ = timed([rsync, "-a", f"{tree.src}/", f"{dst}/"])
            check_copy(tree, dst, rng)
            cool(args.cache, tree)
            out["rsync again"], _ = timed([rsync, "-a", f"{tree.src}/", f"{dst}/"])
        else:
            cool(args.cache, tree)
            out["cp"], _ = timed(["cp", "-r", str(tree.src), str(dst)])
            check_copy(tree, dst, rng)
        shutil.rmtree(dst, ignore_errors=True)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_tree_options(p)
    p.add_argument("--cache", choices=("drop", "evict", "warm"), default="drop", help="before each command")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    rsync = ensure_rsync()
    print(f"rsync: {rsync or 'unavailable (not installed, and installing it needs root and apt-get)'}")
    work = args.dir / "commands"
    figures: dict[str, dict[str, object]] = {}
    try:
        for name in ("large", "small") if args.tree == "both" else (args.tree,):
            tree = ensure_tree(args.dir, name, args)
            print(f"{name}: {len(tree.sizes):,} files, {tree.bytes / 2**20:,.0f} MiB", flush=True)
            rounds = []
            for n in range(1, args.rounds + 1):
                secs = one_round(tree, work, rsync, n, args)
                rounds.append(secs)
                print(f"  round {n}: " + ", ".join(f"{k} {v:.2f}s" for k, v in secs.items()), flush=True)
            median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
            ratios = {"engine/cp": median["engine"] / median["cp"]}
            if rsync:
                ratios["engine/rsync"] = median["engine"] / median["rsync"]
                ratios["rerun/rsync again"] = median["rerun"] / median["rsync again"]
            print(
                f"  median: {', '.join(f'{k} {v:.2f}s' for k, v in median.items())}; "
                + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items())
                + " (time: 1.0 is as fast)",
                flush=True,
            )
            figures[name] = {
                "files": len(tree.sizes),
                "bytes": tree.bytes,
                "median_seconds": {k: round(v, 2) for k, v in median.items()},
                "ratios": {k: round(v, 2) for k, v in ratios.items()},
                "rounds": [{k: round(v, 2) for k, v in r.items()} for r in rounds],
            }
    except BenchFailed as failed:
        print(f"FAILED: {failed}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cache": args.cache, "rsync": bool(rsync), "trees": figures}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
