"""Benchmark: what exactly-once publishing costs, against the same engine run writing directly.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/publish_protocol.py                        # 1,000 and 2M records, 3 rounds
    .venv/bin/python bench/publish_protocol.py --records 1000 --rounds 1

Both sides run the ingest benchmark's job (``bench/ingest_vs_handwritten.py``: JSON orders with
~1% bad rows -> converters -> a Delta table and the error table) through the JobManager with
Delta metadata tables, each round into a fresh warehouse, alternating sides after one warm-up
each. ``protocol`` is the engine as shipped: the batch plan and the commit sequence stored in the
commit log, sinks staged, then published by commit steps (Delta appends with txnAppId/txnVersion),
watermarks saved by a step, the sequence marked done. ``direct`` is the same engine with sinks
written straight to their destination and the watermarks saved after them (what the engine did
before the protocol: at-least-once). Every round's tables are counted with ``deltalake`` (not
Spark) and must agree. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "publish"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _direct_classes() -> tuple[type, type]:
    """A records DAG that writes its sinks directly, and a metadata manager without the commit log."""
    from engine.runtime.metadata import MetadataManager
    from engine.runtime.publisher import Publisher
    from engine.runtime.records import RecordsDag, union_groups
    from engine.sinks.error_table import ErrorTable
    from engine.state.status import Status
    from engine.state.store import DatasetState, utcnow

    class DirectDag(RecordsDag):
        def stage(self, spark: Any, run: Any, ok: Any, refused: Any) -> Any:
            frame = union_groups([(g.group, g.frame) for g in ok if g.frame is not None])
            preds, written = run.plan.predicates, {}
            for sink in self.sinks:
                branch = sink.conf.from_
                sink.write(self.fork.branch(frame, branch, preds[branch], self.ctx))
                written[sink.name] = sum(c.by_branch.get(branch, 0) for g in ok for c in g.counts.values())
            if self.spec.error_table:
                ErrorTable(self.spec.error_table).append(self.fork.branch(frame, "error", preds["error"], self.ctx))
            return [], written

    class DirectPublisher(Publisher):
        def commit(self, dag: Any, result: Any, batch: Any) -> Any:
            now = utcnow()
            saved = [
                DatasetState(self.job, dag.name, dag.scope, o.unit.dataset, h, self.run_id, now, note="run")
                for o in result.datasets
                if o.status == Status.COMMITTED and (h := dag.source.actual_high(o.unit)) is not None
            ]
            if saved:
                self.state.save_state(saved)
            self.status.add_job_status([self._status_row(dag, o, {}) for o in result.datasets])
            return result

    class DirectMetadata(MetadataManager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.publisher = DirectPublisher(
                spark=self.spark, state=self.store, status=self.store, commit_log=self.commit_log
            )

        def begin(self, dag: Any, units: Any, batch: Any, *, reused: bool) -> None:
            return None

    return DirectDag, DirectMetadata


def run_side(spark: Any, side: str, input_path: str, records: int) -> tuple[float, int, int]:
    import engine.runtime.jobmanager as jm
    from bench.ingest_vs_handwritten import engine_job
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore
    from engine.state.delta_store import DeltaMetadataStore

    wh = OUT / f"{side}-{uuid.uuid4().hex[:6]}"
    spec = compile_job(engine_job(input_path, "DISK_ONLY"), name="bench_orders", file=None, warehouse=str(wh))
    saved = (jm.dag_for, jm.MetadataManager)
    if side == "direct":
        direct_dag, jm.MetadataManager = _direct_classes()  # type: ignore[misc]
        jm.dag_for = lambda spec, *, job, run_id: direct_dag(spec, job=job, run_id=run_id)  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        store = DeltaMetadataStore(spark, str(wh / "_engine"))
        manager = jm.JobManager(spark, store)
        planned = manager.plan(spec, f"bench-{side}")
        store.ensure()
        result = manager.execute(planned, InMemoryRunStore())
        seconds = time.perf_counter() - started
    finally:
        jm.dag_for, jm.MetadataManager = saved  # type: ignore[misc]
    if result.status != "SUCCEEDED":
        sys.exit(f"{side}: run failed: {result.summary()}")
    from deltalake import DeltaTable

    error_table = spec.dags[0].error_table
    assert error_table is not None
    valid = DeltaTable(str(wh / "orders")).to_pyarrow_table().num_rows
    errors = DeltaTable(error_table).to_pyarrow_table().num_rows
    shutil.rmtree(wh, ignore_errors=True)
    return seconds, valid, errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, nargs="+", default=[1000, 2_000_000])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    from bench.ingest_vs_handwritten import ensure_data
    from bench.session import start_spark

    spark = start_spark("bench-publish", {"spark.databricks.delta.snapshotPartitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    sizes = []
    for records in args.records:
        data, _ = ensure_data(records)
        times: dict[str, list[float]] = {"protocol": [], "direct": []}
        counts = set()
        for side in ("protocol", "direct"):
            run_side(spark, side, str(data), records)  # warm-up
        for r in range(args.rounds):
            for side in ("protocol", "direct") if r % 2 == 0 else ("direct", "protocol"):
                seconds, valid, errors = run_side(spark, side, str(data), records)
                times[side].append(seconds)
                counts.add((valid, errors))
                print(
                    f"{records:>9} records  round {r + 1}  {side:>8}  {seconds:7.2f} s  valid {valid} errors {errors}"
                )
        if len(counts) != 1:
            sys.exit(f"{records} records: the sides disagree on counts: {sorted(counts)}")
        med = {k: statistics.median(v) for k, v in times.items()}
        sizes.append(
            {
                "records": records,
                "protocol_s": round(med["protocol"], 3),
                "direct_s": round(med["direct"], 3),
                "ratio": round(med["protocol"] / med["direct"], 3),
                "overhead_s": round(med["protocol"] - med["direct"], 3),
            }
        )
    print(f"\npublish protocol vs direct writes (median of {args.rounds} rounds; seconds)")
    for s in sizes:
        print(
            f"{s['records']:>9} records: protocol {s['protocol_s']:.2f}  direct {s['direct_s']:.2f}  "
            f"ratio {s['ratio']:.2f}  overhead {s['overhead_s']:+.2f} s"
        )
    spark.stop()
    print(json.dumps({"bench": "publish_protocol", "rounds": args.rounds, "sizes": sizes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
