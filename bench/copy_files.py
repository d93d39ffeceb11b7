"""Benchmark: copy jobs (file replication on Spark) against ``cp -r`` on the same machine.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/copy_files.py                     # 1 GiB in 50 files, 20,000 small files, 3 rounds
    .venv/bin/python bench/copy_files.py --tree small --small-files 2000 --rounds 1        # quick check

Two source trees are generated once under ``--dir`` (default ``/tmp/engine-bench-copy``, local
disk; kept for the next invocation, ``--clean`` removes them), random bytes:

- ``large``: ``--large-files`` (50) files totalling ``--large-mib`` (1024) MiB;
- ``small``: ``--small-files`` (20,000) files of 1 to 100 KiB spread over ``--small-dirs`` (100)
  directories.

One process starts one SparkSession (``local[2]``, Delta, FAIR scheduling, as the CLI runs it:
``bench/session.py``) and runs, per tree and per round, in alternating order (cp first in odd
rounds, the engine first in even ones):

- ``cp``: ``cp -r <src> <dst>`` (a subprocess) into a destination removed first;
- ``engine``: a copy job ``copy { source = <src>, target = <dst> }`` (defaults: no checksum, so a
  plain local copy uses the kernel's copy as ``cp`` does) run as ``engine/cli/app.py`` runs a job,
  minus the JVM start: ``compile_job``, the job's lease, ``JobManager`` with the Delta metadata
  store (recovery, state, commit log, status rows) and the Delta run store; a new job name per
  round (no state) and a destination removed first;
- ``rerun``: the same job again with nothing changed (it lists both trees, diffs against the
  manifest and writes no commit-log rows).

Before each timed run (untimed): ``sync``, so no earlier run's dirty pages are flushed during it,
then by ``--cache``: ``drop`` (default) ``echo 3 > /proc/sys/vm/drop_caches``: every run reads its
source, directories and inodes from disk (the JVM's and Python's own files too, as in a fresh
process); ``evict``: only the source files' pages are dropped (``posix_fadvise``); ``warm``:
nothing. If dropping is not permitted, that is printed and both sides read a cached source.
Neither side syncs its writes at the end (``cp`` does not). Two untimed engine runs of a job over
200 small files (copy, then unchanged) first create the metadata tables and warm the JVM, the
Python workers and the metadata queries.

Reported: per run, seconds and MB/s (10^6 bytes), the engine's run split into planning (of which
listing), creating the metadata tables, the copy phase (``copy.seconds`` of the DAG's summary:
copying on executors up to building the publish steps), publishing (the commit sequence: renames,
commit log, watermarks, status rows) and the rest; across that split, the wall seconds spent in
calls to the Delta metadata and run stores (overlapping calls counted once, and per method).
Then the medians, the ratios engine/cp (throughput) and the rerun as a share of the first run,
against the goals (large files >= 0.7x ``cp``, small files within 3x of ``cp``, the rerun under
10% of the first run). Beside each run, the CPU seconds *other* processes used meanwhile (on 2
cores a concurrent test suite skews the figures) and the load average before and after.

Checks (any failure exits 1, a wrong copy's time means nothing): every engine run SUCCEEDED with
the expected files and bytes copied (the rerun: none copied, all skipped); every destination
holds exactly the source's relative paths with the same sizes (nothing left in the engine's
staging); the sha256 of a sample of files (different per round) equals the source's. Engine logs
go to ``<dir>/engine.log``; the warehouse stays in ``<dir>/warehouse`` until the next invocation
(destinations are removed at the end). The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GENERATOR_VERSION = 1
STAGING = "_engine_staging"
GOALS = {"large": 0.7, "small": 1 / 3}
"""Engine/cp throughput at least this (small files: within 3x of cp's time)."""
RERUN_GOAL = 0.10
"""A no-change rerun takes less than this share of the first run."""
SAMPLE = {"large": 6, "small": 200}
"""Files per tree and round whose sha256 is compared with the source's."""
WARMUP_FILES = 200
STORE_CALLS = {
    "DeltaMetadataStore": (
        "ensure",
        "load_state",
        "all_state",
        "save_state",
        "add_job_status",
        "add_flow_status",
        "job_status",
        "append_log",
        "log_epoch",
        "read_log",
    ),
    "DeltaRunStore": ("__init__", "ensure", "append"),
}


class BenchFailed(Exception):
    """A run failed or copied the wrong bytes: its timing means nothing."""


# --------------------------------------------------------------------------- CPU accounting


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and all its descendants (the JVM and its Python workers), the
    children they reaped included."""
    ticks, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def _machine_cpu() -> float:
    busy = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(busy[:8]) - busy[3] - busy[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


@dataclass
class Timer:
    """Wall seconds, and the CPU seconds other processes used meanwhile (Linux)."""

    seconds: float = 0.0
    own_cpu: float = 0.0
    other_cpu: float = 0.0
    _start: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __enter__(self) -> Timer:
        machine, own = _machine_cpu(), _tree_cpu(os.getpid())  # ~6 ms of /proc reads, before the clock starts
        self._start = (time.perf_counter(), machine, own)
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start[0]
        self.own_cpu = _tree_cpu(os.getpid()) - self._start[2]
        self.other_cpu = max(0.0, _machine_cpu() - self._start[1] - self.own_cpu)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class MetadataClock:
    """Wall seconds spent in calls to the Delta metadata and run stores (the engine's bookkeeping:
    commit log, state, status and run rows): each call is wrapped, overlapping calls count once."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, str]] = []
        self.lock = threading.Lock()

    def install(self) -> None:
        from engine.state import delta_runs, delta_store

        for cls in (delta_store.DeltaMetadataStore, delta_runs.DeltaRunStore):
            for name in STORE_CALLS[cls.__name__]:
                setattr(cls, name, self._timed(getattr(cls, name)))

    def _timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.spans.append((started, time.perf_counter(), fn.__name__))

        return timed

    def take(self) -> tuple[float, dict[str, float]]:
        """(seconds covered by the calls since the last take, seconds and calls by method)."""
        with self.lock:
            spans, self.spans = sorted(self.spans), []
        covered, end = 0.0, float("-inf")
        by_call: dict[str, float] = {"calls": len(spans)}
        for a, b, name in spans:
            covered += max(0.0, b - max(a, end))
            end = max(end, b)
            by_call[name] = by_call.get(name, 0.0) + b - a
        return covered, by_call


METADATA = MetadataClock()


# --------------------------------------------------------------------------- source trees


@dataclass
class Tree:
    name: str
    src: Path
    sizes: dict[str, int]
    """Relative path -> size of every file."""
    digests: dict[str, str] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())

    def digest(self, rel: str) -> str:
        if rel not in self.digests:
            self.digests[rel] = sha256(self.src / rel)
        return self.digests[rel]


def tree_layout(name: str, args: argparse.Namespace) -> dict[str, int]:
    if name == "large":
        total, n = args.large_mib << 20, args.large_files
        return {f"f{i:03d}.bin": total // n + (total % n if i == n - 1 else 0) for i in range(n)}
    rng = random.Random(7)
    low, high = args.small_kib
    return {
        f"d{i % args.small_dirs:03d}/f{i:05d}.bin": rng.randint(low << 10, high << 10) for i in range(args.small_files)
    }


def ensure_tree(base: Path, name: str, args: argparse.Namespace) -> Tree:
    """The tree's files, generated unless a stamp beside it says they are there already."""
    layout = tree_layout(name, args)
    src, stamp = base / f"src-{name}", base / f"src-{name}.json"
    want = {"version": GENERATOR_VERSION, "files": len(layout), "bytes": sum(layout.values())}
    if stamp.exists() and json.loads(stamp.read_text()) == want and listed_sizes(src) == layout:
        return Tree(name, src, layout)
    shutil.rmtree(src, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    started = time.perf_counter()
    for rel, size in layout.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            for offset in range(0, size, 8 << 20):
                out.write(os.urandom(min(8 << 20, size - offset)))
    stamp.write_text(json.dumps(want))
    print(
        f"  generated {name}: {len(layout):,} files, {want['bytes'] / 2**20:,.0f} MiB "
        f"in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return Tree(name, src, layout)


def listed_sizes(root: Path, skip: str | None = None) -> dict[str, int]:
    out: dict[str, int] = {}
    for directory, dirs, files in os.walk(root):
        if skip in dirs and Path(directory) == root:
            dirs.remove(skip)
        for f in files:
            path = os.path.join(directory, f)
            out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def check_copy(tree: Tree, dst: Path, rng: random.Random) -> None:
    """``dst`` holds exactly the source's files and sizes; a sample has the source's sha256."""
    got = listed_sizes(dst, skip=STAGING)
    if got != tree.sizes:
        missing, extra = set(tree.sizes) - set(got), set(got) - set(tree.sizes)
        wrong = [r for r in set(got) & set(tree.sizes) if got[r] != tree.sizes[r]]
        raise BenchFailed(f"{dst}: {len(missing)} missing, {len(extra)} extra, {len(wrong)} of the wrong size")
    left = listed_sizes(dst / STAGING) if (dst / STAGING).exists() else {}
    if left:
        raise BenchFailed(f"{dst}: {len(left)} file(s) left in {STAGING}")
    for rel in rng.sample(sorted(tree.sizes), min(SAMPLE[tree.name], len(tree.sizes))):
        if sha256(dst / rel) != tree.digest(rel):
            raise BenchFailed(f"{dst / rel}: sha256 differs from the source's")


# --------------------------------------------------------------------------- the runs


def cool(mode: str, tree: Tree) -> str:
    """Flush dirty pages, then drop what ``mode`` says; returns what was done."""
    subprocess.run(["sync"], check=True)
    if mode == "drop":
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        except OSError:
            return "NOT dropped (not permitted)"
        return "dropped"
    if mode == "evict":
        for rel in tree.sizes:
            fd = os.open(tree.src / rel, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "source evicted"
    return "warm"


@dataclass
class Run:
    side: str
    tree: str
    timer: Timer
    cache: str
    phases: dict[str, float] = field(default_factory=dict)
    """Engine runs: plan, listing, tables, copy, publish, rest, metadata (seconds), metadata_calls."""
    summary: dict[str, Any] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)
    """Engine runs: seconds in each metadata store method (summed over calls)."""


def run_cp(tree: Tree, dst: Path, cache: str) -> Run:
    shutil.rmtree(dst, ignore_errors=True)
    done = cool(cache, tree)
    with Timer() as timer:
        subprocess.run(["cp", "-r", str(tree.src), str(dst)], check=True)
    return Run("cp", tree.name, timer, done)


class ListingLog(logging.Handler):
    """Keeps the seconds of the copy DAG's last ``listed ... in N s`` log line."""

    seconds: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("dag %s: listed") and isinstance(record.args, tuple):
            self.seconds = float(str(record.args[3]))


LISTING = ListingLog(logging.INFO)


def run_engine(
    spark: SparkSession, warehouse: Path, job: str, tree: Tree, dst: Path, args: argparse.Namespace, side: str
) -> Run:
    """One run of the copy job as the CLI runs it (compile, lease, plan, ensure, execute)."""
    from engine.commit.lease import Lease
    from engine.runtime import JobManager
    from engine.runtime.session import run_session
    from engine.spec import compile_job
    from engine.state.delta_runs import DeltaRunStore
    from engine.state.delta_store import DeltaMetadataStore

    raw = {"copy": {"source": str(tree.src), "target": str(dst), "verify": {"checksum": args.checksum}}}
    run_id = f"{job}-{side}-{time.strftime('%H%M%S')}"
    done = cool(args.cache, tree)
    LISTING.seconds = None
    METADATA.take()
    with Timer() as timer:
        spec = compile_job(raw, name=job, file=None, warehouse=str(warehouse))
        session = run_session(spark)
        metadata = DeltaMetadataStore(session, f"{warehouse}/_engine")
        runs = DeltaRunStore(session, f"{warehouse}/_engine/runs")
        with Lease(f"{warehouse}/_engine", spec.name, run_id=run_id, ttl_seconds=600) as lease:
            manager = JobManager(session, metadata, guard=lease.check)
            started = time.perf_counter()
            planned = manager.plan(spec, run_id)
            plan = time.perf_counter() - started
            metadata.ensure()
            runs.ensure()
            tables = time.perf_counter() - started - plan
            result = manager.execute(planned, runs)
    metadata_s, calls = METADATA.take()
    calls = {k: round(v, 3) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])}
    summary = result.summary()
    if result.status != "SUCCEEDED":
        raise BenchFailed(f"{side} of {tree.name}: {json.dumps(summary)[:2000]}")
    dag = summary["dags"][0]
    copy_s = float(dag["copy"]["seconds"])
    phases = {
        "plan": plan,
        "listing": LISTING.seconds if LISTING.seconds is not None else float("nan"),
        "tables": tables,
        "copy": copy_s,
        "publish": float(dag["seconds"]) - copy_s,
        "rest": timer.seconds - plan - tables - float(dag["seconds"]),
        "metadata": metadata_s,
        "metadata_calls": calls.pop("calls"),
    }
    return Run(side, tree.name, timer, done, phases, dag["copy"], calls)


def expect(run: Run, tree: Tree, *, copied: int, skipped: int) -> None:
    c = run.summary
    want_bytes = tree.bytes if copied else 0
    if (c["files_copied"], c["files_skipped"], c["files_failed"], c["bytes"]) != (copied, skipped, 0, want_bytes):
        raise BenchFailed(
            f"{run.side} of {tree.name}: copied {c['files_copied']}, skipped {c['files_skipped']}, failed "
            f"{c['files_failed']}, {c['bytes']} bytes; expected {copied}, {skipped}, 0, {want_bytes}"
        )


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / 1e6 / seconds if seconds > 0 else float("inf")


def show(label: str, run: Run, nbytes: int, first: Run | None = None) -> None:
    t = run.timer
    rate = f"{mbps(nbytes, t.seconds):7.1f} MB/s" if first is None else f"{t.seconds / first.timer.seconds:6.1%} of 1st"
    line = f"  {label:<15} {run.side:<6} {t.seconds:7.2f} s  {rate}"
    if run.phases:
        p = run.phases
        line += (
            f"  = plan {p['plan']:.2f} (listing {p['listing']:.2f}) + tables {p['tables']:.2f}"
            f" + copy {p['copy']:.2f} + publish {p['publish']:.2f} + rest {p['rest']:.2f};"
            f" Delta metadata {p['metadata']:.2f} in {p['metadata_calls']:.0f} calls"
        )
    cache = "" if run.cache in ("dropped", "source evicted", "warm") else f"  [page cache {run.cache}]"
    print(f"{line}  | CPU own {t.own_cpu:.1f} s, others {t.other_cpu:.1f} s{cache}", flush=True)


@dataclass
class Bench:
    spark: SparkSession
    base: Path
    args: argparse.Namespace
    runs: list[Run] = field(default_factory=list)

    @property
    def warehouse(self) -> Path:
        return self.base / "warehouse"

    def round(self, n: int, tree: Tree) -> None:
        rng = random.Random(n)
        label = f"round {n} {tree.name}"
        sides = ("cp", "engine") if n % 2 else ("engine", "cp")
        for side in sides:
            if side == "cp":
                run = run_cp(tree, self.base / f"dst-cp-{tree.name}", self.args.cache)
                check_copy(tree, self.base / f"dst-cp-{tree.name}", rng)
                show(label, run, tree.bytes)
                self.runs.append(run)
                continue
            dst = self.base / f"dst-engine-{tree.name}"
            shutil.rmtree(dst, ignore_errors=True)
            job = f"bench_copy_{tree.name}_r{n}"
            first = run_engine(self.spark, self.warehouse, job, tree, dst, self.args, "engine")
            expect(first, tree, copied=len(tree.sizes), skipped=0)
            check_copy(tree, dst, rng)
            show(label, first, tree.bytes)
            again = run_engine(self.spark, self.warehouse, job, tree, dst, self.args, "rerun")
            expect(again, tree, copied=0, skipped=len(tree.sizes))
            check_copy(tree, dst, rng)
            show(label, again, tree.bytes, first)
            self.runs += [first, again]

    def warm_up(self) -> None:
        """Creates the metadata tables, warms the JVM and the Python workers (untimed)."""
        src = self.base / "src-warmup"
        shutil.rmtree(src, ignore_errors=True)
        for i in range(WARMUP_FILES):
            (src / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
            (src / f"d{i % 10}" / f"f{i:03d}.bin").write_bytes(os.urandom(4096))
        warm = Tree("warm-up", src, listed_sizes(src))
        dst = self.base / "dst-warmup"
        run = run_engine(self.spark, self.warehouse, "bench_copy_warmup", warm, dst, self.args, "warm-up")
        expect(run, warm, copied=len(warm.sizes), skipped=0)
        show("warm-up", run, warm.bytes)
        # again, unchanged: the first run found no metadata tables to read (they are created after
        # planning), so only now are the planning queries compiled once
        again = run_engine(self.spark, self.warehouse, "bench_copy_warmup", warm, dst, self.args, "warm-up")
        expect(again, warm, copied=0, skipped=len(warm.sizes))
        show("warm-up", again, warm.bytes, run)


# --------------------------------------------------------------------------- report


def report(tree: Tree, runs: list[Run]) -> dict[str, Any]:
    def med(side: str, key: str | None = None) -> float:
        mine = [r for r in runs if r.tree == tree.name and r.side == side]
        return statistics.median(r.timer.seconds if key is None else r.phases[key] for r in mine)

    cp, engine, rerun = med("cp"), med("engine"), med("rerun")
    ratio = cp / engine
    rerun_share = statistics.median(
        b.timer.seconds / a.timer.seconds
        for a, b in zip(
            [r for r in runs if r.tree == tree.name and r.side == "engine"],
            [r for r in runs if r.tree == tree.name and r.side == "rerun"],
            strict=True,
        )
    )
    keys = ("plan", "listing", "tables", "copy", "publish", "rest", "metadata", "metadata_calls")
    phases = {k: round(med("engine", k), 3) for k in keys}

    def by_call(side: str) -> dict[str, float]:
        mine = [r.calls for r in runs if r.tree == tree.name and r.side == side]
        names = sorted({n for c in mine for n in c}, key=lambda n: -statistics.median(c.get(n, 0.0) for c in mine))
        return {n: round(statistics.median(c.get(n, 0.0) for c in mine), 2) for n in names}

    return {
        "files": len(tree.sizes),
        "mb": round(tree.bytes / 1e6, 1),
        "cp_s": round(cp, 3),
        "engine_s": round(engine, 3),
        "cp_mb_s": round(mbps(tree.bytes, cp), 1),
        "engine_mb_s": round(mbps(tree.bytes, engine), 1),
        "ratio": round(ratio, 3),
        "ratio_goal": round(GOALS[tree.name], 3),
        "ratio_met": ratio >= GOALS[tree.name],
        "copy_phase_s": phases["copy"],
        "copy_phase_mb_s": round(mbps(tree.bytes, phases["copy"]), 1),
        "copy_phase_share": round(phases["copy"] / engine, 3),
        "engine_phases_s": phases,
        "rerun_s": round(rerun, 3),
        "rerun_share": round(rerun_share, 3),
        "rerun_met": rerun_share < RERUN_GOAL,
        "rerun_phases_s": {k: round(med("rerun", k), 3) for k in keys if k != "copy"},
        "engine_metadata_by_call_s": by_call("engine"),
        "rerun_metadata_by_call_s": by_call("rerun"),
    }


def print_table(figures: dict[str, dict[str, Any]]) -> None:
    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    print(
        f"\n  {'tree':<6} {'files':>6} {'MB':>7} | {'cp s':>6} {'cp MB/s':>8} | {'engine s':>8} {'MB/s':>7} | "
        f"{'engine/cp':>9} {'goal':>6} {'':7} | {'copy phase s':>12} {'MB/s':>7} {'share':>6} | "
        f"{'rerun s':>7} {'of 1st':>6} {'goal':>5} {'':7}"
    )
    for name, f in figures.items():
        print(
            f"  {name:<6} {f['files']:>6,} {f['mb']:>7.0f} | {f['cp_s']:>6.2f} {f['cp_mb_s']:>8.1f} | "
            f"{f['engine_s']:>8.2f} {f['engine_mb_s']:>7.1f} | {f['ratio']:>8.2f}x {f['ratio_goal']:>5.2f}x "
            f"{verdict(f['ratio_met']):7} | {f['copy_phase_s']:>12.2f} {f['copy_phase_mb_s']:>7.1f} "
            f"{f['copy_phase_share']:>6.0%} | {f['rerun_s']:>7.2f} {f['rerun_share']:>6.1%} {RERUN_GOAL:>5.0%} "
            f"{verdict(f['rerun_met']):7}"
        )
    print(
        "  (medians; MB = 10^6 bytes; engine/cp = throughput ratio; copy phase = the DAG summary's copy.seconds;\n"
        "   share = copy phase / whole engine run; rerun = no-change rerun as a share of the first run)\n"
        "\n  where the engine's time goes (medians, seconds):"
    )
    for name, f in figures.items():
        for side, phases, calls in (
            ("first", f["engine_phases_s"], f["engine_metadata_by_call_s"]),
            ("rerun", f["rerun_phases_s"], f["rerun_metadata_by_call_s"]),
        ):
            split = " ".join(f"{k} {v:.2f}" for k, v in phases.items() if k not in ("metadata", "metadata_calls"))
            top = ", ".join(f"{k} {v:.2f}" for k, v in calls.items())
            print(
                f"  {name:<6} {side}: {split}\n"
                f"  {'':13} Delta metadata {phases['metadata']:.2f} in {phases['metadata_calls']:.0f} calls: {top}"
            )


# --------------------------------------------------------------------------- main


def add_tree_options(p: argparse.ArgumentParser) -> None:
    """The source trees' options (shared with ``copy_commands.py``: the same trees, cached once)."""
    p.add_argument("--dir", type=Path, default=Path("/tmp/engine-bench-copy"), help="scratch directory (local disk)")
    p.add_argument("--tree", choices=("large", "small", "both"), default="both")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per tree (default 3)")
    p.add_argument("--large-files", type=int, default=50)
    p.add_argument("--large-mib", type=int, default=1024, help="total MiB of the large files (default 1024)")
    p.add_argument("--small-files", type=int, default=20_000)
    p.add_argument("--small-kib", type=int, nargs=2, default=(1, 100), metavar=("MIN", "MAX"))
    p.add_argument("--small-dirs", type=int, default=100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_tree_options(p)
    p.add_argument("--checksum", default="none", help="the engine's verify.checksum (default none, as cp)")
    p.add_argument("--cache", choices=("drop", "evict", "warm"), default="drop", help="before each run (see above)")
    p.add_argument("--clean", action="store_true", help="also remove the generated sources at the end")
    args = p.parse_args(argv)
    if min(args.rounds, args.large_files, args.small_files, args.small_dirs, args.large_mib) < 1:
        p.error("--rounds, --large-files, --large-mib, --small-files and --small-dirs must be >= 1")
    if not 1 <= args.small_kib[0] <= args.small_kib[1]:
        p.error("--small-kib MIN MAX: 1 <= MIN <= MAX")
    return args


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "engine"], cwd=ROOT, capture_output=True, text=True)
    return head.stdout.strip() + ("+engine changes" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base: Path = args.dir.resolve()
    base.mkdir(parents=True, exist_ok=True)
    names = ("large", "small") if args.tree == "both" else (args.tree,)
    figures: dict[str, Any] = {"bench": "copy", "commit": commit(), "rounds": args.rounds, "load_before": load()}
    print(f"copy jobs vs cp -r: engine {figures['commit']}, scratch {base}, load average {figures['load_before']}")
    trees = {n: ensure_tree(base, n, args) for n in names}
    logging.basicConfig(
        filename=base / "engine.log",
        filemode="w",
        level=logging.INFO,
        force=True,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("engine.runtime.copydag").addHandler(LISTING)

    from bench.session import start_spark

    conf = {
        "spark.scheduler.mode": "FAIR",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
    }
    spark = start_spark("bench-copy", conf)
    spark.sparkContext.setLogLevel("ERROR")
    shutil.rmtree(base / "warehouse", ignore_errors=True)
    METADATA.install()
    bench = Bench(spark, base, args)
    try:
        bench.warm_up()
        for n in range(1, args.rounds + 1):
            for tree in trees.values():
                bench.round(n, tree)
    except BenchFailed as exc:
        print(f"FAILED: {exc}", flush=True)
        return 1
    finally:
        spark.stop()
        for p in base.glob("dst-*"):
            shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(base / "src-warmup", ignore_errors=True)
        if args.clean:
            shutil.rmtree(base, ignore_errors=True)
    results = {name: report(tree, bench.runs) for name, tree in trees.items()}
    print_table(results)
    caches = sorted({r.cache for r in bench.runs})
    others = sum(r.timer.other_cpu for r in bench.runs)
    timed = sum(r.timer.seconds for r in bench.runs)
    figures.update(results, cache=caches, other_cpu_s=round(others, 1), timed_s=round(timed, 1), load_after=load())
    print(
        f"  page cache before each timed run: {', '.join(caches)}; "
        f"load average after {figures['load_after']}; other processes used {others:.0f} CPU-s "
        f"during {timed:.0f} s of timed runs{' (noisy: the machine was not quiet)' if others > 0.05 * timed else ''}\n"
        f"  check: every engine run SUCCEEDED with the expected counts; every destination holds the source's paths "
        f"and sizes; sampled sha256 match -> OK"
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
