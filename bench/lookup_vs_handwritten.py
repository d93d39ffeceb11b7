"""Benchmark: the engine's ``lookup`` (a broadcast join with a reference Delta table) against the
same enrichment written by hand in PySpark, in one process.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/lookup_vs_handwritten.py                         # 1M records, 3 rounds
    .venv/bin/python bench/lookup_vs_handwritten.py --records 200000 --rounds 1

Both sides run the ingest of ``bench/ingest_vs_handwritten.py`` (the same generated orders, the
same checks) and enrich each order with its customer's ``segment`` and ``region`` from a reference
Delta table of 50,000 customers: the engine with ``{ type = lookup, on = [customer] }``, the hand
side with ``converted.join(broadcast(customers), "customer", "left")``. One untimed warm-up each,
then timed rounds in which the sides take turns to go first; every round's tables are read back
with ``deltalake`` and must hold the generator's valid and error counts, every valid order
enriched. The last line on stdout is a one-line JSON of the figures; exit 1 when a count disagrees.

``--own-cost`` also runs each side without the join (the plain ingest, alternating with the
others) and prints what the lookup adds to each: the converter's own cost beside the join's,
apart from the ingest's (``bench/ingest_vs_handwritten.py``), which bounds the ratio. What a side
adds is the median over rounds of its run less its plain run of the same round (paired: the
machine's drift between rounds cancels), and ``own_ratio`` is the hand's addition over the
engine's (1.0: the converter costs what the broadcast join costs).

``--steady`` measures every run after a job's first, as an hourly job runs: each side's rounds
append to the same tables, the engine's with the same metadata store (it remembers the files it read
and that its chain passed its checks, as a job's metadata does). Each round adds the generated
files again under new names (hard links) to the side's own input directory: the engine's files
source reads the new ones, the hand side reads the round's files by name. Each round must add
the generator's valid count to the side's table, every row enriched.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest_vs_handwritten import (  # noqa: E402
    OUT,
    cpu_clock,
    engine_job,
    ensure_data,
    hand_converted,
    rotated,
)
from bench.ingest_vs_handwritten import run_engine as run_engine_plain  # noqa: E402
from bench.ingest_vs_handwritten import run_hand as run_hand_plain  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.state.store import MetadataStore

CUSTOMERS = 50_000
"""The generator's customers: ``c00000`` .. ``c49999``."""


def ensure_reference() -> Path:
    """The customers' reference Delta table, written once with ``deltalake`` (not Spark)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    path = OUT / "data" / f"customers-{CUSTOMERS}"
    if not (path / "_delta_log").exists():
        rows = {
            "customer": [f"c{c:05d}" for c in range(CUSTOMERS)],
            "segment": ["big" if c % 7 == 0 else "small" for c in range(CUSTOMERS)],
            "region": [("north", "south", "east", "west")[c % 4] for c in range(CUSTOMERS)],
        }
        write_deltalake(str(path), pa.table(rows))
    return path


def run_engine(
    spark: SparkSession, input_path: str, reference: Path, out: Path, metadata: MetadataStore | None = None
) -> Path:
    """The engine's run, with ``metadata`` (a fresh store when ``None``: a job's first run)."""
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore

    job = engine_job(input_path, "DISK_ONLY")
    job["converters"].append({"type": "lookup", "path": str(reference), "on": ["customer"]})
    spec = compile_job(job, name="bench_orders", file=None, warehouse=str(out))
    result = JobManager(spark, metadata).run(spec, f"bench-{uuid.uuid4().hex[:8]}", InMemoryRunStore())
    if result.status != "SUCCEEDED":
        raise RuntimeError(f"engine run failed: {result.summary()}")
    return out / "orders"


def run_hand(
    spark: SparkSession, input_path: str, reference: Path, out: Path, metadata: MetadataStore | None = None
) -> Path:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    customers = spark.read.format("delta").load(str(reference))
    converted = hand_converted(spark, input_path).join(F.broadcast(customers), "customer", "left")
    converted = converted.persist(StorageLevel.DISK_ONLY)
    try:
        valid = converted.where(F.col("reason").isNull()).drop("reason", "record")
        valid.write.format("delta").mode("append").save(str(out / "orders"))
        errors = converted.where(F.col("reason").isNotNull()).select(
            F.lit(out.name).alias("run_id"), "reason", "record", F.current_timestamp().alias("error_time")
        )
        errors.write.format("delta").mode("append").save(str(out / "_errors"))
    finally:
        converted.unpersist()
    return out / "orders"


def engine_plain(
    spark: SparkSession, input_path: str, reference: Path, out: Path, metadata: MetadataStore | None = None
) -> Path:
    """The engine's ingest without the lookup (``--own-cost``)."""
    return run_engine_plain(spark, input_path, out, "DISK_ONLY", metadata).valid


def hand_plain(
    spark: SparkSession, input_path: str, reference: Path, out: Path, metadata: MetadataStore | None = None
) -> Path:
    """The hand-written ingest without the join (``--own-cost``)."""
    return run_hand_plain(spark, input_path, out, "DISK_ONLY").valid


def added_by_lookup(runs: list[tuple[float, float | None]], plain: list[tuple[float, float | None]]) -> float:
    """What the lookup adds to a side: the median over rounds of each round's run less that
    round's run without the join (``--own-cost``)."""
    return statistics.median(with_join - without for (with_join, _), (without, _) in zip(runs, plain, strict=True))


def _rounded(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio, 3)


def valid_rows(path: Path) -> int:
    """The valid orders of a side without the join, read with ``deltalake``."""
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table(columns=["order_id"]).num_rows


def enriched(path: Path) -> tuple[int, int]:
    """(rows, rows with a region) of the valid orders, read with ``deltalake``."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table(columns=["region"])
    return table.num_rows, table.num_rows - table.column("region").null_count


def steady_input(data_dir: Path, side: str, n: int) -> tuple[Path, str]:
    """``side``'s input directory with round ``n``'s files added (hard links to the generated
    ones, named for the round), and a directory of those files alone."""
    into = OUT / "runs" / f"steady-in-{side}"
    alone = OUT / "runs" / f"steady-rounds-{side}" / f"r{n:03d}"
    into.mkdir(parents=True, exist_ok=True)
    alone.mkdir(parents=True)
    for part in sorted(data_dir.glob("part-*.json")):
        (alone / part.name).hardlink_to(part)
        (into / f"r{n:03d}-{part.name}").hardlink_to(part)
    return into, str(alone)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--own-cost", action="store_true", help="also time each side without the join")
    p.add_argument("--steady", action="store_true", help="every run after a job's first (see above)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    data_dir, manifest = ensure_data(args.records)
    reference = ensure_reference()
    from bench.session import start_spark

    spark = start_spark()
    shutil.rmtree(OUT / "runs", ignore_errors=True)
    sides = {"engine": run_engine, "hand": run_hand}
    if args.own_cost:
        sides |= {"engine-plain": engine_plain, "hand-plain": hand_plain}
    figures: dict[str, list[tuple[float, float | None]]] = {s: [] for s in sides}
    counts: set[tuple[str, int, int]] = set()
    from engine.state.store import InMemoryMetadataStore

    stores = {s: InMemoryMetadataStore() for s in sides}  # --steady: each side's, across its rounds
    had = dict.fromkeys(sides, (0, 0))  # --steady: the rows each side's table held before the round
    for n in range(args.rounds + 1):
        for side in rotated(list(sides), n):
            run = sides[side]
            out = OUT / "runs" / (f"steady-{side}" if args.steady else f"lookup-{side}-{n}")
            source, metadata = str(data_dir), None
            if args.steady:
                into, files = steady_input(data_dir, side, n)
                source, metadata = (str(into), stores[side]) if side.startswith("engine") else (files, None)
            before, started = cpu_clock(), time.perf_counter()
            valid = run(spark, source, reference, out, metadata)
            seconds, after = time.perf_counter() - started, cpu_clock()
            cpu = after[1] - before[1] if before and after else None
            rows, with_region = enriched(valid) if "plain" not in side else (valid_rows(valid),) * 2
            if args.steady:  # what this round added
                rows, with_region, had[side] = rows - had[side][0], with_region - had[side][1], (rows, with_region)
            counts.add((side, rows, with_region))
            label = "warm-up" if n == 0 else f"round {n}"
            shown = "" if cpu is None else f"  cpu={cpu:.1f}s"
            print(f"{label:>8} {side:<12} {seconds:7.2f}s  valid={rows:,} enriched={with_region:,}{shown}", flush=True)
            if n:
                figures[side].append((seconds, cpu))
            if not args.steady:
                shutil.rmtree(out, ignore_errors=True)
    spark.stop()
    shutil.rmtree(OUT / "runs", ignore_errors=True)
    rps = {s: statistics.median(args.records / sec for sec, _ in figures[s]) for s in figures}
    cpus = {s: [c for _, c in figures[s] if c is not None] for s in figures}
    cpu_ratio = statistics.median(cpus["hand"]) / statistics.median(cpus["engine"]) if all(cpus.values()) else None
    ok = counts == {(s, manifest["valid"], manifest["valid"]) for s in sides}
    ratio = rps["engine"] / rps["hand"]
    print(f"median: engine {rps['engine']:,.0f} rec/s, hand {rps['hand']:,.0f} rec/s, engine/hand = {ratio:.3f}")
    own: dict[str, float] = {}
    own_ratio: float | None = None
    if args.own_cost:
        wall = {s: statistics.median(sec for sec, _ in figures[s]) for s in figures}
        own = {s: round(added_by_lookup(figures[s], figures[f"{s}-plain"]), 3) for s in ("engine", "hand")}
        plain = wall["hand-plain"] / wall["engine-plain"]
        added = f"engine +{own['engine']:.2f}, hand +{own['hand']:.2f}"
        own_ratio = own["hand"] / own["engine"] if own["engine"] > 0 else None
        shown = "n/a" if own_ratio is None else f"{own_ratio:.3f}"
        print(f"the lookup adds (median of paired rounds, s): {added}, hand/engine = {shown}")
        print(f"the ingest alone, engine/hand = {plain:.3f}")
    print(f"check: every valid order enriched on both sides -> {'OK' if ok else f'MISMATCH {sorted(counts)}'}")
    summary = {
        "records": args.records,
        "rounds": args.rounds,
        "steady": args.steady,
        "engine_seconds": [round(s, 3) for s, _ in figures["engine"]],
        "hand_seconds": [round(s, 3) for s, _ in figures["hand"]],
        "ratio": round(ratio, 3),
        "cpu_ratio": _rounded(cpu_ratio),
        "goal": 0.95,
        "counts_match": ok,
        **({"lookup_adds_seconds": own, "own_ratio": _rounded(own_ratio)} if own else {}),
    }
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
