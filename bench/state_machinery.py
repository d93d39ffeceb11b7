"""Benchmark: what the incremental-state machinery costs per run, for 1, 100 and 1,000 datasets.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/state_machinery.py                      # 1, 100, 1000 datasets, 2 rounds
    .venv/bin/python bench/state_machinery.py --datasets 1 10 --rounds 1

For each size N it builds N directories (one dataset each, ``datasets = directory``) holding one
small JSON file, runs the job once to create every dataset's watermark in real Delta metadata
tables, then for each timed round drops one new file into every directory and runs the job again
phase by phase, exactly as the JobManager does, timing:

- ``read_state``: reading the commit log and loading the N watermarks from the Delta state table;
- ``plan_units``: the files source's work-unit calculator (listing, new-file selection,
  throttling) plus packing into multi-work-units;
- ``save_state``: the publish step: storing the commit sequence, running it (publishing the staged
  sink data, appending the N new watermarks), marking it done, the N JobStatus rows and the
  FlowStatus row (since the exactly-once protocol this includes the sink's Delta commit);
- ``run``: the whole run (the three above plus checking, reading, converting and writing).

Every round checks that each dataset read exactly its one new file (N*10 records) and that the
sink holds every id once (read back with ``deltalake``, not Spark). The machinery's share is
reported of the same run and of the 1-dataset run's time. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "state"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RECORDS_PER_FILE = 10


def write_batch(root: Path, datasets: int, batch: int) -> None:
    """One new file in every dataset directory, with ids unique across datasets and batches."""
    mtime = time.time() - 3600 + batch  # old enough to read, in batch order
    for d in range(datasets):
        base = (batch * datasets + d) * RECORDS_PER_FILE
        path = root / f"ds{d:04d}" / f"batch-{batch:03d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"id": base + i, "v": f"r{i}"}) + "\n" for i in range(RECORDS_PER_FILE)))
        os.utime(path, (mtime, mtime))


def job(root: Path) -> dict[str, Any]:
    return {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(root / "*"),
                "schema": "id BIGINT, v STRING",
                "datasets": "directory",
            }
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
        "publish": {"policy": "partial"},
    }


def timed_run(spark: Any, spec: Any, store: Any, run_id: str) -> dict[str, float]:
    """One run, phase by phase, as JobManager.plan/execute do it."""
    from engine.commit.batch import BatchRef
    from engine.runtime.metadata import MetadataManager
    from engine.runtime.records import RecordsDag
    from engine.sources.workunits import pack

    t0 = time.perf_counter()
    manager = MetadataManager(store, spark=spark, job=spec.name, run_id=run_id)
    (dag_spec,) = spec.dags
    dag = RecordsDag(dag_spec, job=spec.name, run_id=run_id)
    number, _ = manager.batch(dag)
    ctx = manager.context(dag)
    t1 = time.perf_counter()
    units = dag.source.plan(spark, ctx)
    pack(units, max_groups=dag_spec.work_units.max_groups)
    t2 = time.perf_counter()
    plan = dag.plan(spark, ctx)  # plans the units again and checks the chain: counted in `run`
    assert plan is not None
    batch = BatchRef(spec.name, dag.name, number, epoch=store.log_epoch())
    manager.begin(dag, plan.units, batch, reused=False)
    result = dag.run(spark, plan, batch)
    t3 = time.perf_counter()
    result = manager.publisher.commit(dag, result, batch)
    manager.publisher.finish([result], start=manager.now)
    t4 = time.perf_counter()
    if result.status != "SUCCEEDED":
        sys.exit(f"run {run_id} failed: {result.message}")
    return {
        "read_state": t1 - t0,
        "plan_units": t2 - t1,
        "save_state": t4 - t3,
        "run": t4 - t0,
        "records": float(result.records_read),
    }


def bench_size(spark: Any, datasets: int, rounds: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore
    from engine.state.delta_store import DeltaMetadataStore

    work = OUT / f"n{datasets}"
    shutil.rmtree(work, ignore_errors=True)
    land, wh = work / "land", work / "wh"
    write_batch(land, datasets, 0)
    spec = compile_job(job(land), name=f"state{datasets}", file=None, warehouse=str(wh))
    store = DeltaMetadataStore(spark, str(wh / "_engine")).ensure()
    JobManager(spark, store).run(spec, "warm-up", InMemoryRunStore())  # every dataset gets a watermark
    phases: dict[str, list[float]] = {k: [] for k in ("read_state", "plan_units", "save_state", "run")}
    for r in range(1, rounds + 1):
        write_batch(land, datasets, r)
        got = timed_run(spark, spec, store, f"round-{r}")
        if got["records"] != datasets * RECORDS_PER_FILE:
            sys.exit(f"{datasets} datasets, round {r}: read {got['records']:.0f}, expected {datasets * 10}")
        for k in phases:
            phases[k].append(got[k])
    ids = DeltaTable(str(wh / "out")).to_pyarrow_table().column("id").to_pylist()
    expected = (rounds + 1) * datasets * RECORDS_PER_FILE
    if len(ids) != expected or len(set(ids)) != expected:
        sys.exit(f"{datasets} datasets: the sink holds {len(ids)} ids ({len(set(ids))} distinct), expected {expected}")
    shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in phases.items()}
    med["machinery"] = med["read_state"] + med["plan_units"] + med["save_state"]
    return {"datasets": datasets, **{k: round(v, 3) for k, v in med.items()}}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=int, nargs="+", default=[1, 100, 1000])
    p.add_argument("--rounds", type=int, default=2, help="timed rounds per size (median reported)")
    args = p.parse_args(argv)
    from bench.session import start_spark

    spark = start_spark("bench-state", {"spark.databricks.delta.snapshotPartitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    rows = [bench_size(spark, n, args.rounds) for n in args.datasets]
    small = next((r["run"] for r in rows if r["datasets"] == min(args.datasets)), rows[0]["run"])
    print(f"\nstate machinery per run (median of {args.rounds} rounds; seconds)")
    header = ("datasets", "read_state", "plan_units", "save_state", "machinery", "run", "of_run", "of_small_run")
    print("  ".join(f"{h:>12}" for h in header))
    for r in rows:
        r["share_of_run"] = round(r["machinery"] / r["run"], 3)
        r["share_of_small_run"] = round(r["machinery"] / small, 3)
        cells = [
            r["datasets"],
            r["read_state"],
            r["plan_units"],
            r["save_state"],
            r["machinery"],
            r["run"],
            f"{r['share_of_run']:.1%}",
            f"{r['share_of_small_run']:.1%}",
        ]
        print("  ".join(f"{c:>12}" for c in cells))
    spark.stop()
    print(json.dumps({"bench": "state_machinery", "rounds": args.rounds, "sizes": rows}))


if __name__ == "__main__":
    main()
