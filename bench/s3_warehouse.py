"""Benchmark: the engine's ingest with its warehouse on an S3-compatible server against the same
run with the warehouse on the local disk.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/s3_warehouse.py                     # 200k records, 3 rounds
    .venv/bin/python bench/s3_warehouse.py --records 1000000 --rounds 5

The engine side of ``bench/ingest_vs_handwritten.py`` (its generated JSON input, its job), run as a
user runs it (the CLI's whole run: lease, plan, commit log, metadata and error tables, the Delta
sink), in one SparkSession, alternating ``local`` (a fresh local warehouse), ``s3`` (a fresh
prefix of a bucket on moto's server on loopback, tests/s3.py, reached through a named ``s3``
connection; the metadata tables through delta-rs, ``metadata.backend=auto``) and ``s3-spark`` (the
same with ``metadata.backend=spark``: the metadata tables through Spark's Delta), after one untimed
warm-up of each. The input stays on the local disk. Every round's
valid and rejected rows are read back with ``deltalake`` (over S3 for the ``s3`` side) and must be
what the generator wrote. Prints each round, the medians, ``s3/local`` and ``s3-spark/s3`` (what
delta-rs saves on S3), and what
the S3 side stored (objects and bytes: metadata and data). The last line on stdout is a one-line
JSON of the figures. Exit code: 0 ok, 1 a count disagrees or a run failed.

moto keeps objects in memory in one Python process: its requests cost more CPU than a real
object store's, on the same two cores as Spark. Read the ratio as an upper bound of the overhead.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


SIDES = ("local", "s3", "s3-spark")


def run(job: str, warehouse: str, *extra: str) -> dict[str, Any]:
    """One whole run through the CLI entry in this process; its summary (exit 0 required)."""
    from engine.cli.app import run_task
    from engine.config import run_app

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_app([f"job={job}", f"warehouse={warehouse}", "progress=off", *extra], run_task)
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    if code != 0:
        raise RuntimeError(f"run on {warehouse} failed: {summary}")
    return dict(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from bench.ingest_vs_handwritten import engine_job, ensure_data
    from tests.s3 import S3Server

    data_dir, manifest = ensure_data(args.records)
    expected = (manifest["valid"], manifest["errors"])
    print(f"input: {data_dir} ({manifest['records']:,} records, {manifest['errors']:,} bad)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="engine-s3-bench-"))
    jobs = work / "jobs"
    jobs.mkdir()
    job = engine_job(str(data_dir), "DISK_ONLY")
    job.pop("name")
    (jobs / "bench_orders.yaml").write_text(yaml.safe_dump(job))

    with S3Server() as s3:
        bucket = s3.make_bucket("bench-lake")
        os.environ["ENGINE_CONNECTIONS_DIR"] = str(s3.connection(work / "connections", bucket).parent)
        os.environ["ENGINE_JOBS_DIR"] = str(jobs)
        from bench.session import start_spark

        spark = start_spark("bench-s3")
        storage = s3.storage_options()

        def counts(warehouse: str) -> tuple[int, int]:
            from deltalake import DeltaTable

            options = storage if warehouse.startswith("s3a://") else None
            rows = [
                int(DeltaTable(f"{warehouse}/{table}", storage_options=options).to_pyarrow_dataset().count_rows())
                for table in ("orders", "_errors/bench_orders")
            ]
            return rows[0], rows[1]

        results: list[dict[str, Any]] = []
        ok = True
        for n in range(args.rounds + 1):
            label = "warm-up" if n == 0 else f"round {n}"
            for side in SIDES:
                warehouse = str(work / f"local-{n}") if side == "local" else f"s3a://{bucket}/{side}-r{n}"
                extra = {
                    "local": [],
                    "s3": ["storage.connections=[lake_s3]"],
                    "s3-spark": ["storage.connections=[lake_s3]", "metadata.backend=spark"],
                }[side]
                started = time.perf_counter()
                summary = run("bench_orders", warehouse, *extra)
                seconds = time.perf_counter() - started
                found = counts(warehouse)
                ok = ok and found == expected
                print(
                    f"{label:>8} {side:<8} {seconds:7.2f}s  valid={found[0]:,} errors={found[1]:,}"
                    f"  (publish and metadata: {seconds - summary['dags'][0]['seconds']:.2f}s outside the DAG)",
                    flush=True,
                )
                if n:
                    results.append({"side": side, "seconds": seconds})
        pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"s3-r{args.rounds}/")
        objects = [o for page in pages for o in page.get("Contents", [])]
        metadata = [o for o in objects if "/_engine/" in o["Key"]]
        spark.stop()

    median = {side: statistics.median(r["seconds"] for r in results if r["side"] == side) for side in SIDES}
    ratio = median["s3"] / median["local"]
    by_spark = median["s3-spark"] / median["s3"]
    print(
        f"median: local {median['local']:.2f}s, s3 {median['s3']:.2f}s, s3-spark {median['s3-spark']:.2f}s; "
        f"s3/local = {ratio:.2f}, s3-spark/s3 = {by_spark:.2f}"
    )
    print(
        f"one S3 run stored {len(objects)} objects, {sum(o['Size'] for o in objects) / 1e6:.1f} MB; "
        f"of them {len(metadata)} metadata objects (_engine/), {sum(o['Size'] for o in metadata) / 1e3:.0f} kB"
    )
    if not ok:
        print(f"error: a round's counts differ from the generator's {expected}")
    figures = {"records": args.records, "rounds": args.rounds, **{f"{k}_s": round(v, 3) for k, v in median.items()}}
    figures = {k.replace("-", "_"): v for k, v in figures.items()}
    print(json.dumps({**figures, "s3_over_local": round(ratio, 3), "s3_spark_over_s3": round(by_spark, 3), "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
