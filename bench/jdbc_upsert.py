"""Benchmark: the engine's Delta -> PostgreSQL upsert against the same written by hand.

Run from the repository root (after ``bash scripts/bootstrap.sh`` and ``bash scripts/postgres.sh install``)::

    .venv/bin/python bench/jdbc_upsert.py                      # 500,000 rows, 3 rounds
    .venv/bin/python bench/jdbc_upsert.py --rows 100000 --rounds 1

It starts a throwaway PostgreSQL (``tests/postgres.py``'s, on loopback) and one local
SparkSession, writes a Delta table of ``--rows`` rows, and before every round loads the target
table with the first half of those ids (untimed), so each round's upsert updates half the rows and
inserts the other half:

- engine: a ``delta`` source into a ``jdbc`` sink with ``mode = upsert`` (staging table, then one
  transaction: ``INSERT ... ON CONFLICT DO UPDATE`` and the batch id into the control table),
  compiled and run by ``JobManager`` with a fresh warehouse;
- hand: ``df.write.jdbc`` into a staging table, then the same ``INSERT ... ON CONFLICT DO UPDATE``
  and a ``DROP TABLE`` through ``psql``.

After every round the target is checked with ``psql`` (row count, distinct ids, sum of versions).
The last stdout line is a one-line JSON of the figures (rows/s of each side, engine/hand).
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
OUT = ROOT / "bench" / "out" / "jdbc"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLE = "bench_customers"
COLUMNS = "id, name, amount, version"


def reset(pg: Any, rows: int) -> None:
    """The target holding ids [0, rows / 2) at version 1."""
    pg.psql(
        f"DROP TABLE IF EXISTS {TABLE}; "
        f"CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, name TEXT, amount DOUBLE PRECISION, version INT); "
        f"INSERT INTO {TABLE} SELECT g, 'old' || g, 0, 1 FROM generate_series(0, {rows // 2 - 1}) g"
    )


def run_engine(spark: SparkSession, pg: Any, source: Path, out: Path) -> None:
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore

    job = {
        "sources": {"src": {"type": "delta", "path": str(source)}},
        "sinks": {
            "db": {
                "type": "jdbc",
                "url": pg.jdbc_url,
                "user": pg.user,
                "password": pg.password,
                "table": TABLE,
                "mode": "upsert",
                "keys": ["id"],
            }
        },
    }
    spec = compile_job(job, name="bench_upsert", file=None, warehouse=str(out))
    result = JobManager(spark).run(spec, f"bench-{uuid.uuid4().hex[:8]}", InMemoryRunStore())
    if result.status != "SUCCEEDED":
        raise RuntimeError(f"engine run failed: {result.summary()}")


def run_hand(spark: SparkSession, pg: Any, source: Path, out: Path) -> None:
    staging = f"stage_{uuid.uuid4().hex[:8]}"
    props = {"user": pg.user, "password": pg.password, "driver": "org.postgresql.Driver", "batchsize": "10000"}
    spark.read.format("delta").load(str(source)).write.jdbc(pg.jdbc_url, staging, mode="overwrite", properties=props)
    pg.psql(
        f"BEGIN; INSERT INTO {TABLE} ({COLUMNS}) SELECT {COLUMNS} FROM {staging} ON CONFLICT (id) DO UPDATE SET "
        "name = EXCLUDED.name, amount = EXCLUDED.amount, version = EXCLUDED.version; "
        f"DROP TABLE {staging}; COMMIT"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    from bench.session import start_spark
    from tests.postgres import running_postgres

    spark = start_spark("bench-jdbc")
    shutil.rmtree(OUT, ignore_errors=True)
    source = OUT / "source"
    spark.range(args.rows).selectExpr(
        "id", "concat('new', id) AS name", "id * 1.5 AS amount", "2 AS version"
    ).write.format("delta").save(str(source))
    want = (str(args.rows), str(args.rows), str(args.rows * 2))
    rounds: list[tuple[str, str, float, bool]] = []
    with running_postgres() as pg:
        for label in ["warm-up", *[f"round {n}" for n in range(1, args.rounds + 1)]]:
            for side, run in (("engine", run_engine), ("hand", run_hand)):
                reset(pg, args.rows)
                out = OUT / f"{side}-{label.replace(' ', '')}"
                t0 = time.perf_counter()
                run(spark, pg, source, out)
                seconds = time.perf_counter() - t0
                got = tuple(
                    pg.psql(f"SELECT count(*), count(DISTINCT id), sum(version) FROM {TABLE}").strip().split("|")
                )
                ok = got == want
                rounds.append((side, label, seconds, ok))
                print(
                    f"{label:>8} {side:<6} {seconds:7.2f}s {args.rows / seconds:>10,.0f} rows/s  "
                    f"(rows, ids, sum of versions) = {got} {'OK' if ok else 'MISMATCH'}",
                    flush=True,
                )
                shutil.rmtree(out, ignore_errors=True)
    spark.stop()

    timed = [r for r in rounds if r[1] != "warm-up"]
    secs = {side: [r[2] for r in timed if r[0] == side] for side in ("engine", "hand")}
    rate = {side: statistics.median(args.rows / s for s in secs[side]) for side in secs}
    ok = all(r[3] for r in rounds)
    ratio = rate["engine"] / rate["hand"]
    print(
        f"median: engine {rate['engine']:,.0f} rows/s, hand {rate['hand']:,.0f} rows/s, engine/hand = {ratio:.3f}; "
        f"every round's table checked with psql: {'OK' if ok else 'MISMATCH'}"
    )
    summary = {
        "rows": args.rows,
        "rounds": args.rounds,
        "engine_seconds": [round(s, 2) for s in secs["engine"]],
        "hand_seconds": [round(s, 2) for s in secs["hand"]],
        "ratio": round(ratio, 3),
        "tables_match": ok,
    }
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
