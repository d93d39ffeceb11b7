"""Benchmark: the engine's JSON -> Delta ingest against the same work written by hand in PySpark.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/ingest_vs_handwritten.py                       # 2M records, 3 rounds
    .venv/bin/python bench/ingest_vs_handwritten.py --records 200000 --rounds 1
    .venv/bin/python bench/ingest_vs_handwritten.py --persist MEMORY_AND_DISK

It generates (once, cached under ``bench/out/data``) JSON-lines orders with ~1% bad rows, starts
one local SparkSession, runs one untimed warm-up of each side, then timed rounds in which the sides
take turns to go first (engine, hand; hand, engine; ...: :func:`rotated`), each into a fresh output
directory under ``bench/out/runs``. Both sides write the valid rows to one Delta table and the
rejected rows to another; the row counts of every round are read back with the ``deltalake``
package (not Spark) and must agree between the sides and with what the generator wrote. The last
line on stdout is a one-line JSON of the figures. Exit code: 0 ok, 1 the counts disagree (or a run failed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from engine.state.store import MetadataStore

GENERATOR_VERSION = 1
FILES = 8
BAD_EVERY = 100  # one row in BAD_EVERY is bad: ~1%
BAD_KINDS = ("malformed_json", "null_order_id", "non_numeric_amount", "negative_amount", "bad_timestamp")
PERSIST_LEVELS = ("DISK_ONLY", "MEMORY_AND_DISK", "MEMORY_ONLY", "NONE")

SCHEMA_DDL = (
    "order_id BIGINT, customer STRING, email STRING, amount STRING, currency STRING, "
    "created_at STRING, items ARRAY<STRING>"
)
DATA_COLUMNS = ("order_id", "customer", "email", "amount", "currency", "created_at", "items")
AMOUNT_TYPE = "decimal(12,2)"
TS_FORMAT = "yyyy-MM-dd HH:mm:ss"
CORRUPT = "_corrupt_record"


# --------------------------------------------------------------------------- data generation


def _bad_kind(i: int) -> str | None:
    """Which kind of bad row record ``i`` is, if any: deterministic, so the counts are known."""
    if i % BAD_EVERY != 7:
        return None
    return BAD_KINDS[(i // BAD_EVERY) % len(BAD_KINDS)]


def _write_file(path: str, start: int, stop: int, seed: int) -> None:
    """Write records ``start..stop-1`` as JSON lines (plain string formatting: fast)."""
    rnd = Random(seed)
    randint, choice = rnd.randint, rnd.choice
    currencies = ("EUR", "USD", "GBP", "CHF")
    lines = []
    for i in range(start, stop):
        kind = _bad_kind(i)
        order_id = "null" if kind == "null_order_id" else str(i + 1)
        amount = f"{randint(0, 99_999) / 100:.2f}"
        if kind == "non_numeric_amount":
            amount = choice(("n/a", "12,50", "ten", ""))
        elif kind == "negative_amount":
            amount = f"-{randint(1, 99_999) / 100:.2f}"
        created = (
            f"2025-{randint(1, 12):02d}-{randint(1, 28):02d} "
            f"{randint(0, 23):02d}:{randint(0, 59):02d}:{randint(0, 59):02d}"
        )
        if kind == "bad_timestamp":
            created = choice(("2025-13-40 25:61:00", "02/11/2025 09:01", "yesterday", "2025-06-01T10:00:00Z"))
        items = ", ".join(f'"sku-{randint(1, 500)}"' for _ in range(randint(1, 3)))
        cust = randint(0, 49_999)
        line = (
            f'{{"order_id": {order_id}, "customer": "c{cust:05d}", "email": "user{cust}@example.com", '
            f'"amount": "{amount}", "currency": "{choice(currencies)}", "created_at": "{created}", '
            f'"items": [{items}]}}'
        )
        if kind == "malformed_json":
            line = line[: len(line) // 2]
        lines.append(line)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
        fh.write("\n")


def ensure_data(records: int) -> tuple[Path, dict[str, Any]]:
    """The input directory for ``records`` records, generated once; and its manifest."""
    data_dir = OUT / "data" / f"orders-{records}-v{GENERATOR_VERSION}"
    manifest_path = data_dir / "_manifest.json"  # Spark skips names starting with _
    if manifest_path.exists():
        return data_dir, json.loads(manifest_path.read_text())
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    started = time.monotonic()
    bounds = [records * k // FILES for k in range(FILES + 1)]
    with ProcessPoolExecutor(max_workers=min(FILES, os.cpu_count() or 1)) as pool:
        futures = [
            pool.submit(_write_file, str(data_dir / f"part-{k:03d}.json"), bounds[k], bounds[k + 1], 1000 + k)
            for k in range(FILES)
        ]
        for f in futures:
            f.result()
    by_kind = {kind: 0 for kind in BAD_KINDS}
    for i in range(7, records, BAD_EVERY):
        by_kind[BAD_KINDS[(i // BAD_EVERY) % len(BAD_KINDS)]] += 1
    bad = sum(by_kind.values())
    manifest = {"records": records, "files": FILES, "valid": records - bad, "errors": bad, "bad_by_kind": by_kind}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")  # written last: marks the data complete
    size_mb = sum(p.stat().st_size for p in data_dir.glob("part-*.json")) / 2**20
    print(f"generated {records:,} records ({size_mb:.0f} MiB, {FILES} files) in {time.monotonic() - started:.1f}s")
    return data_dir, manifest


# --------------------------------------------------------------------------- the two sides


def engine_job(input_path: str, persist: str) -> dict[str, Any]:
    """The demo job's shape, trimmed to what the hand-written side also does."""
    return {
        "name": "bench_orders",
        "persist": persist,
        "sources": {"orders": {"type": "files", "format": "json", "path": input_path, "schema": SCHEMA_DDL}},
        "converters": [
            {"type": "require", "columns": ["order_id"]},
            {"type": "cast", "columns": {"amount": AMOUNT_TYPE}},
            {"type": "check", "name": "non_negative_amount", "expr": "amount >= 0", "reason": "negative amount"},
            {"type": "parse_timestamp", "column": "created_at", "format": TS_FORMAT},
            {"type": "derive", "columns": {"order_date": "to_date(created_at)"}},
        ],
        "sinks": {"lake": {"type": "delta", "from": "valid", "path": "orders"}},
    }


@dataclass(frozen=True)
class Outputs:
    valid: Path
    errors: Path


def run_engine(
    spark: SparkSession, input_path: str, out: Path, persist: str, metadata: MetadataStore | None = None
) -> Outputs:
    """The engine's run, with ``metadata`` (a fresh store when ``None``: a job's first run)."""
    from engine.runtime import JobManager
    from engine.spec import compile_job
    from engine.state import InMemoryRunStore

    spec = compile_job(engine_job(input_path, persist), name="bench_orders", file=None, warehouse=str(out))
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    result = JobManager(spark, metadata).run(spec, run_id, InMemoryRunStore())
    if result.status != "SUCCEEDED":
        raise RuntimeError(f"engine run failed: {result.summary()}")
    error_table = spec.dags[0].error_table
    assert error_table is not None
    return Outputs(valid=out / "orders", errors=Path(error_table))


def _reason(checks: list[tuple[Column, str]]) -> Column:
    """The first failing check's reason, or null for a valid row."""
    from pyspark.sql import functions as F

    expr = None
    for bad, why in checks:
        expr = F.when(bad, F.lit(why)) if expr is None else expr.when(bad, F.lit(why))
    assert expr is not None
    return expr


def hand_converted(spark: SparkSession, input_path: str) -> DataFrame:
    """Read and convert, as one would write it by hand: native expressions, no Python UDF."""
    from pyspark.sql import functions as F

    raw = (
        spark.read.schema(f"{SCHEMA_DDL}, `{CORRUPT}` STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(input_path)
    )
    parsed = raw.select(
        *DATA_COLUMNS,
        F.col(CORRUPT),
        F.col("amount").try_cast(AMOUNT_TYPE).alias("amount_dec"),
        F.try_to_timestamp(F.col("created_at"), F.lit(TS_FORMAT)).alias("created_ts"),
    )
    reason = _reason(
        [
            (F.col(CORRUPT).isNotNull(), "malformed record"),
            (F.col("order_id").isNull(), "order_id is null"),
            (F.col("amount").isNotNull() & F.col("amount_dec").isNull(), f"amount is not a {AMOUNT_TYPE}"),
            (~F.coalesce(F.col("amount_dec") >= 0, F.lit(False)), "negative amount"),
            (F.col("created_at").isNotNull() & F.col("created_ts").isNull(), f"created_at is not {TS_FORMAT}"),
        ]
    )
    original = F.coalesce(F.col(CORRUPT), F.to_json(F.struct(*DATA_COLUMNS), {"ignoreNullFields": "false"}))
    return parsed.withColumn("reason", reason).select(
        "order_id",
        "customer",
        "email",
        F.col("amount_dec").alias("amount"),
        "currency",
        F.col("created_ts").alias("created_at"),
        "items",
        F.to_date("created_ts").alias("order_date"),
        "reason",
        F.when(F.col("reason").isNotNull(), original).alias("record"),
    )


def run_hand(spark: SparkSession, input_path: str, out: Path, persist: str) -> Outputs:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    converted = hand_converted(spark, input_path)
    if persist != "NONE":
        converted = converted.persist(getattr(StorageLevel, persist))
    try:
        outputs = Outputs(valid=out / "orders", errors=out / "_errors")
        valid = converted.where(F.col("reason").isNull()).drop("reason", "record")
        valid.write.format("delta").mode("append").save(str(outputs.valid))
        errors = converted.where(F.col("reason").isNotNull()).select(
            F.lit(out.name).alias("run_id"), "reason", "record", F.current_timestamp().alias("error_time")
        )
        errors.write.format("delta").mode("append").save(str(outputs.errors))
    finally:
        converted.unpersist()
    return outputs


# --------------------------------------------------------------------------- harness


def delta_rows(path: Path) -> int:
    """Exact row count of a Delta table, read with ``deltalake`` (no Spark)."""
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).to_pyarrow_dataset().count_rows())


@dataclass
class Round:
    side: str
    label: str
    seconds: float
    valid: int
    errors: int
    own_cpu: float | None
    """CPU seconds this process and the JVM used: steadier than wall time on a busy machine."""
    other_cpu: float | None
    """CPU seconds other processes used meanwhile (this machine's cores are shared), if known."""


def _proc_cpu_seconds(pid: int | str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu_clock() -> tuple[float, float] | None:
    """(CPU seconds used by the whole machine, by this process and its children: the JVM); Linux only."""
    try:
        busy = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        machine = (sum(busy[:8]) - busy[3] - busy[4]) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait
        children = " ".join(p.read_text() for p in Path("/proc/self/task").glob("*/children")).split()
        own = _proc_cpu_seconds("self") + sum(_proc_cpu_seconds(c) for c in children)
    except (OSError, ValueError, IndexError):
        return None
    return machine, own


def rotated(sides: list[str], n: int) -> list[str]:
    """The order the sides run in round ``n``: each goes first as often as the others, so that no
    side always runs right after the same one (and after what its run leaves to collect or flush)."""
    k = n % len(sides)
    return sides[k:] + sides[:k]


def timed(spark: SparkSession, side: str, label: str, input_path: str, persist: str, keep: bool) -> Round:
    out = OUT / "runs" / f"{side}-{label}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    run = run_engine if side == "engine" else run_hand
    cpu_before = cpu_clock()
    started = time.perf_counter()
    outputs = run(spark, input_path, out, persist)
    seconds = time.perf_counter() - started
    cpu_after = cpu_clock()
    own_cpu = other_cpu = None
    if cpu_before and cpu_after:
        own_cpu = cpu_after[1] - cpu_before[1]
        other_cpu = max(0.0, (cpu_after[0] - cpu_before[0]) - own_cpu)
    result = Round(side, label, seconds, delta_rows(outputs.valid), delta_rows(outputs.errors), own_cpu, other_cpu)
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


THREAD_KINDS = (
    ("JIT", ("C1 CompilerThre", "C2 CompilerThre")),
    ("GC", ("GC Thread", "G1 ")),
    ("tasks", ("Executor task",)),
)


def thread_cpu() -> dict[str, float]:
    """CPU seconds by kind of thread (JIT compiler, GC, Spark tasks, the rest) of this process and
    its children, from ``/proc/<pid>/task/*``; Linux only (empty elsewhere)."""
    out: dict[str, float] = {}
    try:
        children = " ".join(p.read_text() for p in Path("/proc/self/task").glob("*/children")).split()
        for pid in ["self", *children]:
            for task in Path(f"/proc/{pid}/task").iterdir():
                try:
                    name = (task / "comm").read_text().strip()
                    seconds = _proc_cpu_seconds(f"{pid}/task/{task.name}")
                except OSError:
                    continue  # the thread ended meanwhile
                kind = next((k for k, prefixes in THREAD_KINDS if name.startswith(prefixes)), "other")
                if pid == "self":
                    kind = "python"
                out[kind] = out.get(kind, 0.0) + seconds
    except OSError:
        return {}
    return out


@dataclass
class Stage:
    id: int
    what: str
    tasks: int
    cpu: float
    run: float
    rows_in: int
    rows_out: int


class StageLog:
    """The Spark stages run since the last call, from the status store (``executorCpuTime`` is
    the tasks' CPU; the rest of the process's CPU is the driver's: planning, JIT, GC)."""

    def __init__(self, spark: SparkSession) -> None:
        self.sc = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
        self.next = 0

    def take(self) -> list[Stage]:
        self.sc.listenerBus().waitUntilEmpty(10_000)
        store = self.sc.statusStore()
        out, missing, i = [], 0, self.next
        while missing < 20:  # stage ids are dense; skipped ones (a reused shuffle) are rare
            try:
                s = store.lastStageAttempt(i)
            except Exception:
                missing += 1
                i += 1
                continue
            missing = 0
            what = str(s.description().get()) if s.description().isDefined() else s.name()
            out.append(
                Stage(
                    i,
                    " ".join(what.split())[:80],
                    s.numTasks(),
                    s.executorCpuTime() / 1e9,
                    s.executorRunTime() / 1e3,
                    s.inputRecords(),
                    s.outputRecords(),
                )
            )
            i += 1
            self.next = i
        return out


def print_stages(side: str, stages: list[Stage], own_cpu: float | None, threads: dict[str, float]) -> None:
    tasks_cpu = sum(s.cpu for s in stages)
    driver = "" if own_cpu is None else f", outside tasks (driver, JIT, GC) {own_cpu - tasks_cpu:.1f}"
    print(f"   {side} stages: tasks' CPU {tasks_cpu:.1f}s{driver}")
    if threads:
        print("   by thread: " + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(threads.items(), key=lambda kv: -kv[1])))
    for s in stages:
        if s.cpu >= 0.05 or s.rows_in or s.rows_out:
            print(
                f"     {s.cpu:6.2f}s cpu {s.run:6.2f}s run {s.tasks:3d} tasks "
                f"in {s.rows_in:>9,} out {s.rows_out:>9,}  {s.what}"
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=2_000_000, help="records to generate (default 2,000,000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per side (default 3)")
    p.add_argument("--persist", choices=PERSIST_LEVELS, default="DISK_ONLY", help="storage level, both sides")
    p.add_argument("--keep-output", action="store_true", help="keep each round's tables under bench/out/runs")
    p.add_argument("--explain", action="store_true", help="print both sides' physical plans first")
    p.add_argument("--stages", action="store_true", help="print each round's Spark stages: CPU, time, rows")
    args = p.parse_args(argv)
    if args.records < BAD_EVERY or args.rounds < 1:
        p.error("--records must be >= 100 and --rounds >= 1")
    return args


def explain(spark: SparkSession, input_path: str, persist: str) -> None:
    from engine.runtime.records import RecordsDag
    from engine.runtime.records.reading import group_frame
    from engine.sources.base import PlanContext
    from engine.sources.workunits import Budget, pack
    from engine.spec import compile_job
    from engine.state.rows import utcnow

    spec = compile_job(engine_job(input_path, persist), name="bench_orders", file=None, warehouse=str(OUT / "explain"))
    dag = RecordsDag(spec.dags[0], job=spec.name, run_id="explain")
    ctx = PlanContext(state={}, per_dataset=Budget(), per_run=Budget(), now=utcnow())
    plan = dag.plan(spark, ctx)
    assert plan is not None
    group = pack(plan.units, max_groups=dag.spec.work_units.max_groups)[0]
    print("== engine: the converted frame of its first work-unit group")
    group_frame(dag.parts, spark, plan, group).explain(mode="formatted")
    print("== hand-written: the persisted frame")
    hand_converted(spark, input_path).explain(mode="formatted")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    data_dir, manifest = ensure_data(args.records)
    input_path = str(data_dir)  # a directory, not a glob: spares a FileStreamSink warning per read
    print(f"input: {data_dir} ({manifest['records']:,} records, {manifest['errors']:,} bad)")

    from bench.session import start_spark

    spark = start_spark()
    if args.explain:
        explain(spark, input_path, args.persist)
    shutil.rmtree(OUT / "runs", ignore_errors=True)

    stage_log = StageLog(spark)

    def go(side: str, label: str) -> Round:
        stage_log.take()
        threads_before = thread_cpu()
        r = timed(spark, side, label, input_path, args.persist, args.keep_output)
        threads = {k: v - threads_before.get(k, 0.0) for k, v in thread_cpu().items()}
        print(
            f"{label:>8} {side:<6} {r.seconds:7.2f}s  {args.records / r.seconds:>10,.0f} rec/s  "
            f"valid={r.valid:,} errors={r.errors:,}"
            + ("" if r.own_cpu is None else f"  cpu={r.own_cpu:.1f}s (other processes: {r.other_cpu:.1f}s)"),
            flush=True,
        )
        if args.stages:
            print_stages(side, stage_log.take(), r.own_cpu, threads)
        return r

    rounds = [go("engine", "warm-up"), go("hand", "warm-up")]
    for n in range(1, args.rounds + 1):
        rounds += [go(side, f"round {n}") for side in rotated(["engine", "hand"], n)]
    spark.stop()

    timed_rounds = [r for r in rounds if r.label != "warm-up"]
    secs = {side: [r.seconds for r in timed_rounds if r.side == side] for side in ("engine", "hand")}
    rps = {side: statistics.median(args.records / s for s in secs[side]) for side in secs}
    ratio = rps["engine"] / rps["hand"]
    cpu = {side: [r.own_cpu for r in timed_rounds if r.side == side] for side in ("engine", "hand")}
    read = {side: [c for c in cpu[side] if c is not None] for side in cpu}  # a reading can fail (a child ending)
    cpu_median = {side: statistics.median(read[side]) if read[side] else 0.0 for side in cpu}
    cpu_ratio = cpu_median["hand"] / cpu_median["engine"] if cpu_median["engine"] and cpu_median["hand"] else None

    other = [r.other_cpu for r in timed_rounds]
    busy = sum(o or 0.0 for o in other)
    if busy > 0.05 * sum(r.seconds for r in timed_rounds):
        print(f"warning: other processes used {busy:.0f} CPU-s during the timed rounds: the figures are noisy")
    expected = (manifest["valid"], manifest["errors"])
    written = {side: sorted({(r.valid, r.errors) for r in rounds if r.side == side}) for side in ("engine", "hand")}
    ok = written["engine"] == written["hand"] == [expected]
    print(
        f"median: engine {rps['engine']:,.0f} rec/s, hand {rps['hand']:,.0f} rec/s, "
        f"engine/hand = {ratio:.3f} (goal >= 1.0)"
    )
    if cpu_ratio is not None:
        print(
            f"median CPU-s: engine {cpu_median['engine']:.1f}, hand {cpu_median['hand']:.1f}, "
            f"hand/engine = {cpu_ratio:.3f} (the same ratio by CPU time)"
        )
    shown = {side: ", ".join(f"valid={v:,} errors={e:,}" for v, e in written[side]) for side in written}
    print(
        f"check (tables read back with deltalake, every run): engine {shown['engine']}; hand {shown['hand']}; "
        f"generated valid={expected[0]:,} errors={expected[1]:,} -> {'OK' if ok else 'MISMATCH'}"
    )
    summary = {
        "records": args.records,
        "rounds": args.rounds,
        "persist": args.persist,
        "engine_seconds": [round(s, 3) for s in secs["engine"]],
        "hand_seconds": [round(s, 3) for s in secs["hand"]],
        "engine_median_rps": round(rps["engine"]),
        "hand_median_rps": round(rps["hand"]),
        "ratio": round(ratio, 3),
        "valid": expected[0],
        "errors": expected[1],
        "engine_cpu_seconds": [None if c is None else round(c, 1) for c in cpu["engine"]],
        "hand_cpu_seconds": [None if c is None else round(c, 1) for c in cpu["hand"]],
        "cpu_ratio": None if cpu_ratio is None else round(cpu_ratio, 3),
        "counts_match": ok,
        "other_cpu_seconds": None if None in other else [round(o or 0.0, 1) for o in other],
    }
    print(json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
