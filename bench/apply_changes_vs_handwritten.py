"""Benchmark: the engine's Delta sink ``mode = apply_changes`` (SCD1) against the same change
batch applied by a Delta MERGE written by hand in PySpark, in one process.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/apply_changes_vs_handwritten.py                       # 1M rows, 200k events, 3 rounds
    .venv/bin/python bench/apply_changes_vs_handwritten.py --rows 200000 --events 50000 --rounds 1

The table holds ``--rows`` customers, with tombstones of earlier batches' deletes beside it (``rows
/ 50`` keys the batch never has), as the engine keeps them for a table it applies changes to. Both
are generated once with ``deltalake`` and then written again by Spark's Delta: a table that Spark
(the engine's commits or a MERGE by hand) has committed to carries a checksum file of its state,
which ``deltalake`` does not write and which saves both sides Spark jobs over the log, as in every
batch after a table's first. The batch is ``--events`` change events as JSON lines: updates of
existing keys, new keys, 10% deletes, 10% late events (older than the table's row: no effect) and
several events for some keys. Each round starts both sides from a copy of the same table (untimed).
The engine runs a job reading the batch with the files source into ``{ type = delta, mode =
apply_changes, keys = [id], sequence_by = seq, delete_when = "op = 'D'" }``; the hand side reads
the same files with the same schema, keeps each key's last event (``row_number`` over the key by
sequence) and runs one MERGE (delete where the event is a newer delete, update where newer, insert
new keys). One untimed warm-up each, then timed rounds in which the sides take turns to go first;
both tables are read back with ``deltalake`` and must hold the same rows. The last line on stdout
is a one-line JSON of the figures; exit 1 when the tables differ.

The engine keeps tombstones for its hard deletes (a later run's late event must not insert a
deleted key again), which the MERGE by hand does not: ``--no-tombstones`` runs the engine without
them (``tombstone_retention = 0``). It also keeps an error table for the records it rejects,
for which it persists the converted records while the sink stages them; the hand side has
neither: ``--no-error-table`` runs the engine without it (``errors.enabled = false``: nothing is
persisted then). With both, the engine does the same work as the hand side.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import random
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest_vs_handwritten import OUT, cpu_clock, rotated  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "id BIGINT, seq BIGINT, op STRING, name STRING, amount DOUBLE"
FILES = 4


def ensure_data(rows: int, events: int) -> tuple[Path, Path]:
    """The base table (``deltalake``) and the change batch (JSON lines), made once per size."""
    import pyarrow as pa
    from deltalake import write_deltalake

    base = OUT / "data" / f"cdc-table-{rows}"
    if not (base / "_delta_log").exists():
        shutil.rmtree(base, ignore_errors=True)
        ids = list(range(rows))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "seq": pa.array([1_000 + i % 1_000 for i in ids], pa.int64()),
                "op": ["U"] * rows,
                "name": [f"n{i}" for i in ids],
                "amount": pa.array([float(i % 10_000) for i in ids], pa.float64()),
            }
        )
        write_deltalake(str(base), table)
    kept = base / "_engine_tombstones"
    if not (kept / "_delta_log").exists():  # earlier batches' deletes, of keys this batch never has
        shutil.rmtree(kept, ignore_errors=True)
        ids = list(range(10 * rows, 10 * rows + rows // 50))
        recorded = pa.array([time.time_ns() // 1000] * len(ids), pa.timestamp("us", tz="UTC"))
        tombstones = {"id": pa.array(ids, pa.int64()), "seq": pa.array(ids, pa.int64()), "recorded_at": recorded}
        write_deltalake(str(kept), pa.table(tombstones))
    batch = OUT / "data" / f"cdc-events-{rows}-{events}"
    if not (batch / "_done").exists():
        shutil.rmtree(batch, ignore_errors=True)
        batch.mkdir(parents=True)
        rng = random.Random(20)
        lines: list[list[str]] = [[] for _ in range(FILES)]
        for i in range(events):
            key = rng.randrange(rows) if rng.random() < 0.8 else rows + rng.randrange(events)
            late = rng.random() < 0.1
            event = {
                "id": key,
                "seq": rng.randrange(1, 1_000) if late else 10_000 + i,
                "op": "D" if rng.random() < 0.1 else "U",
                "name": f"e{i}",
                "amount": float(i % 977),
            }
            lines[i % FILES].append(json.dumps(event))
        for n, part in enumerate(lines):
            (batch / f"part-{n:02d}.json").write_text("\n".join(part) + "\n")
        (batch / "_done").write_text("")
    return base, batch


def committed_by_spark(spark: SparkSession, base: Path) -> Path:
    """``base`` (with its tombstones) written again by Spark's Delta, once: with the checksum file
    Spark's commits leave (see the module)."""
    spark_base = base.with_name(f"{base.name}-spark")
    for part in ("", "_engine_tombstones"):
        target = spark_base / part
        if not (target / "_delta_log").exists():
            shutil.rmtree(target, ignore_errors=True)
            spark.read.format("delta").load(str(base / part)).write.format("delta").save(str(target))
    return spark_base


def engine_job(events: Path, *, tombstones: bool = True, error_table: bool = True) -> dict[str, Any]:
    """The engine's job: the batch's files into the table (``customers`` in the warehouse)."""
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(events), "schema": SCHEMA}},
        "sinks": {
            "table": {
                "type": "delta",
                "path": "customers",
                "mode": "apply_changes",
                "keys": ["id"],
                "sequence_by": "seq",
                "delete_when": "op = 'D'",
                **({} if tombstones else {"tombstone_retention": 0}),
            }
        },
        **({} if error_table else {"errors": {"enabled": False}}),
    }


def run_engine(
    spark: SparkSession, events: Path, out: Path, *, tombstones: bool = True, error_table: bool = True
) -> Path:
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore

    job = engine_job(events, tombstones=tombstones, error_table=error_table)
    spec = compile_job(job, name="bench_cdc", file=None, warehouse=str(out))
    result = JobManager(spark).run(spec, f"bench-{uuid.uuid4().hex[:8]}", InMemoryRunStore())
    if result.status != "SUCCEEDED":
        raise RuntimeError(f"engine run failed: {result.summary()}")
    return out / "customers"


def run_hand(spark: SparkSession, events: Path, out: Path) -> Path:
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changes = spark.read.schema(SCHEMA).json(str(events))
    last = Window.partitionBy("id").orderBy(F.col("seq").desc(), F.col("op"), F.col("name").desc())
    latest = changes.withColumn("rn", F.row_number().over(last)).where("rn = 1").drop("rn")
    (
        DeltaTable.forPath(spark, str(out / "customers"))
        .alias("t")
        .merge(latest.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.op = 'D' AND s.seq > t.seq")
        .whenMatchedUpdateAll("s.seq > t.seq")
        .whenNotMatchedInsertAll("s.op <> 'D'")
        .execute()
    )
    return out / "customers"


def fingerprint(path: Path) -> tuple[int, str]:
    """(rows, a hash of every row sorted), read with ``deltalake``."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table(columns=["id", "seq", "name", "amount"]).sort_by("id")
    digest = hashlib.sha256()
    for column in table.columns:
        digest.update(str(column.to_pylist()).encode())
    return table.num_rows, digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--no-tombstones",
        action="store_true",
        help="the engine keeps no tombstones for its deletes (tombstone_retention = 0), as the MERGE by hand",
    )
    p.add_argument(
        "--no-error-table",
        action="store_true",
        help="the engine keeps no error table (errors.enabled = false), as the hand side: nothing is persisted",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    base, events = ensure_data(args.rows, args.events)
    from bench.session import start_spark

    spark = start_spark()
    base = committed_by_spark(spark, base)
    shutil.rmtree(OUT / "runs", ignore_errors=True)
    engine = functools.partial(run_engine, tombstones=not args.no_tombstones, error_table=not args.no_error_table)
    sides = {"engine": engine, "hand": run_hand}
    figures: dict[str, list[tuple[float, float | None]]] = {"engine": [], "hand": []}
    prints: set[tuple[int, str]] = set()
    for n in range(args.rounds + 1):
        for side in rotated(list(sides), n):
            run = sides[side]
            out = OUT / "runs" / f"cdc-{side}-{n}"
            shutil.copytree(base, out / "customers")
            before, started = cpu_clock(), time.perf_counter()
            table = run(spark, events, out)
            seconds, after = time.perf_counter() - started, cpu_clock()
            cpu = after[1] - before[1] if before and after else None
            rows, digest = fingerprint(table)
            prints.add((rows, digest))
            label = "warm-up" if n == 0 else f"round {n}"
            shown = "" if cpu is None else f"  cpu={cpu:.1f}s"
            print(f"{label:>8} {side:<6} {seconds:7.2f}s  rows={rows:,} hash={digest}{shown}", flush=True)
            if n:
                figures[side].append((seconds, cpu))
            shutil.rmtree(out, ignore_errors=True)
    spark.stop()
    eps = {s: statistics.median(args.events / sec for sec, _ in figures[s]) for s in figures}
    cpus = {s: [c for _, c in figures[s] if c is not None] for s in figures}
    cpu_ratio = statistics.median(cpus["hand"]) / statistics.median(cpus["engine"]) if all(cpus.values()) else None
    ok = len(prints) == 1
    ratio = eps["engine"] / eps["hand"]
    print(f"median: engine {eps['engine']:,.0f} events/s, hand {eps['hand']:,.0f} events/s, engine/hand = {ratio:.3f}")
    print(f"check: both sides leave the same table -> {'OK' if ok else f'MISMATCH {sorted(prints)}'}")
    summary = {
        "rows": args.rows,
        "events": args.events,
        "rounds": args.rounds,
        "engine_seconds": [round(s, 3) for s, _ in figures["engine"]],
        "hand_seconds": [round(s, 3) for s, _ in figures["hand"]],
        "ratio": round(ratio, 3),
        "cpu_ratio": None if cpu_ratio is None else round(cpu_ratio, 3),
        "goal": 0.9,
        "engine_tombstones": not args.no_tombstones,
        "engine_error_table": not args.no_error_table,
        "tables_match": ok,
    }
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
