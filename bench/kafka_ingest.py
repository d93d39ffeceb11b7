"""Benchmark: the engine's Kafka -> Delta ingest against the same batch read written by hand in PySpark.

Run from the repository root (after ``bash scripts/bootstrap.sh`` and ``bash scripts/kafka.sh install``)::

    .venv/bin/python bench/kafka_ingest.py                          # 2M messages, 3 rounds
    .venv/bin/python bench/kafka_ingest.py --messages 200000 --rounds 1

It starts a throwaway single-node Kafka broker (``tests/kafka.py``'s, on loopback), produces
``--messages`` JSON messages (one in 100 malformed) into one topic of ``--partitions`` partitions
with librdkafka, starts one local SparkSession, runs one untimed warm-up of each side, then
alternates timed rounds (engine, hand, ...). Each round reads the whole topic:

- engine: a ``kafka`` source (format json, a DDL schema) into a ``delta`` sink, compiled and run
  by ``JobManager`` with a fresh warehouse (so no watermark), malformed values to its error table;
- hand: ``spark.read.format("kafka")`` from the earliest to the latest offsets, ``from_json``
  PERMISSIVE with ``_corrupt_record``, the parsed frame persisted (``DISK_ONLY``, as the engine's
  fork does) and written as valid rows and rejects to two Delta tables.

Every round's two tables are read back with ``deltalake`` and must hold exactly the produced valid
and malformed counts. The last stdout line is a one-line JSON of the figures; the goal is
engine/hand >= 0.9 (issue 24). Exit code: 0 ok, 1 the counts disagree.
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
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "kafka"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = "order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, created_at STRING"
BAD_EVERY = 100
TOPIC = "bench_orders"


def produce(kafka: Any, messages: int) -> tuple[int, int]:
    """``messages`` JSON orders (every ``BAD_EVERY``-th one malformed); (valid, malformed)."""
    batch = 100_000
    bad = 0
    for start in range(0, messages, batch):
        values = []
        for i in range(start, min(messages, start + batch)):
            if i % BAD_EVERY == BAD_EVERY - 1:
                values.append('{"order_id": ' + str(i) + ', "customer": "c' + str(i % 997))  # cut short
                bad += 1
            else:
                values.append(
                    f'{{"order_id": {i}, "customer": "c{i % 997}", "amount": {i % 5000 / 10}, '
                    f'"currency": "EUR", "created_at": "2026-11-{1 + i % 28:02d} 10:00:00"}}'
                )
        kafka.produce(TOPIC, values, keys=[str(i) for i in range(start, start + len(values))])
    return messages - bad, bad


def engine_job(bootstrap: str) -> dict[str, Any]:
    return {
        "sources": {"orders": {"type": "kafka", "bootstrap_servers": bootstrap, "topics": [TOPIC], "schema": SCHEMA}},
        "sinks": {"lake": {"type": "delta", "path": "orders"}},
    }


def run_engine(spark: SparkSession, bootstrap: str, out: Path) -> tuple[Path, Path]:
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore

    spec = compile_job(engine_job(bootstrap), name="bench_kafka", file=None, warehouse=str(out))
    result = JobManager(spark).run(spec, f"bench-{uuid.uuid4().hex[:8]}", InMemoryRunStore())
    if result.status != "SUCCEEDED":
        raise RuntimeError(f"engine run failed: {result.summary()}")
    assert spec.dags[0].error_table is not None
    return out / "orders", Path(spec.dags[0].error_table)


def run_hand(spark: SparkSession, bootstrap: str, out: Path) -> tuple[Path, Path]:
    """The batch read as one writes it by hand: native expressions, no Python UDF."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    text = F.col("value").cast("string")
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
    parsed = raw.select(
        F.from_json(text, f"{SCHEMA}, _corrupt_record STRING", options).alias("v"),
        "topic",
        "partition",
        "offset",
        "timestamp",
        F.col("key").cast("string").alias("key"),
    ).select("v.*", "topic", "partition", "offset", "timestamp", "key")
    parsed = parsed.persist(StorageLevel.DISK_ONLY)
    try:
        valid = parsed.where(F.col("_corrupt_record").isNull()).drop("_corrupt_record")
        valid.write.format("delta").mode("append").save(str(out / "orders"))
        errors = parsed.where(F.col("_corrupt_record").isNotNull()).select(
            "topic", "partition", "offset", F.col("_corrupt_record").alias("record")
        )
        errors.write.format("delta").mode("append").save(str(out / "_errors"))
    finally:
        parsed.unpersist()
    return out / "orders", out / "_errors"


def rows(path: Path) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).to_pyarrow_dataset().count_rows()) if path.exists() else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--partitions", type=int, default=3)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    from bench.session import start_spark
    from tests.kafka import running_kafka

    with running_kafka() as kafka:
        kafka.create_topic(TOPIC, partitions=args.partitions)
        started = time.perf_counter()
        expected = produce(kafka, args.messages)
        took = time.perf_counter() - started
        print(f"produced {args.messages:,} messages ({expected[1]:,} malformed) in {took:.1f}s")
        spark = start_spark("bench-kafka")
        shutil.rmtree(OUT, ignore_errors=True)
        rounds: list[tuple[str, str, float, tuple[int, int]]] = []
        for label in ["warm-up", *[f"round {n}" for n in range(1, args.rounds + 1)]]:
            for side, run in (("engine", run_engine), ("hand", run_hand)):
                out = OUT / f"{side}-{label.replace(' ', '')}"
                t0 = time.perf_counter()
                valid, errors = run(spark, kafka.bootstrap, out)
                seconds = time.perf_counter() - t0
                counts = (rows(valid), rows(errors))
                rounds.append((side, label, seconds, counts))
                print(
                    f"{label:>8} {side:<6} {seconds:7.2f}s {args.messages / seconds:>10,.0f} msg/s  "
                    f"valid={counts[0]:,} errors={counts[1]:,}",
                    flush=True,
                )
                shutil.rmtree(out, ignore_errors=True)
        spark.stop()

    timed = [r for r in rounds if r[1] != "warm-up"]
    secs = {side: [r[2] for r in timed if r[0] == side] for side in ("engine", "hand")}
    rate = {side: statistics.median(args.messages / s for s in secs[side]) for side in secs}
    ratio = rate["engine"] / rate["hand"]
    ok = all(r[3] == expected for r in rounds)
    print(
        f"median: engine {rate['engine']:,.0f} msg/s, hand {rate['hand']:,.0f} msg/s, "
        f"engine/hand = {ratio:.3f} (goal >= 0.9); counts {'OK' if ok else 'MISMATCH'} "
        f"(valid={expected[0]:,} errors={expected[1]:,}, read back with deltalake)"
    )
    summary = {
        "messages": args.messages,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "engine_seconds": [round(s, 2) for s in secs["engine"]],
        "hand_seconds": [round(s, 2) for s in secs["hand"]],
        "ratio": round(ratio, 3),
        "counts_match": ok,
    }
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
