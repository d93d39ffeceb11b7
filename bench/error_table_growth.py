"""Benchmark: what the error table's size costs a steady run, in one process.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/error_table_growth.py                              # 200k records, 2M ids held
    .venv/bin/python bench/error_table_growth.py --held 5000000 --rounds 6

Every run with rejects leaves out of the error table the ids it already holds (an anti-join: what
keeps the table exactly-once when a range is read again). Three jobs run the ingest of
``bench/ingest_vs_handwritten.py`` as an hourly job would: each round adds the generated files
again under new names to the job's input directory, and the job, with its own metadata store,
reads the new ones. After each job's first run (untimed):

- ``empty``: nothing more in its error table (one batch's rejects);
- ``held``: ``--held`` more ids, as if from earlier batches of files named before the new ones
  (dates, sequence numbers: names that grow);
- ``unordered``: as many, from files named at random in the same folder, as the new files are
  (a landing folder of random ids): the held names interleave the new ones.

Then ``--rounds`` timed rounds, the jobs taking turns to go first. A batch reads only the held
ids of its DAG whose ``origin`` (file) lies within its own files' range, and the files' statistics
skip the rest (``engine.sinks.error_table.held_scope``): ``held`` should cost what ``empty``
costs, ``unordered`` about what every run cost before (most ids read and joined). Each round's
error table is read back with ``deltalake``: it must hold exactly the generator's rejects once
per round (none of a batch's rejects taken for held), else exit 1. The last stdout line is a
one-line JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest_vs_handwritten import OUT, ensure_data, rotated  # noqa: E402
from bench.ingest_vs_handwritten import run_engine as run_engine_plain  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SIDES = ("empty", "held", "unordered")
EARLIER = "file:///earlier/"
"""The ``held`` side's held ids' origins: names that sort before the new files' (``file:///work/...``)."""
HELD_RECORD = '{"held": true}'


def steady_round(data_dir: Path, side: str, n: int) -> Path:
    """``side``'s input directory with round ``n``'s files added (hard links to the generated
    ones): named for the round, or at random for ``unordered``."""
    import uuid

    into = OUT / "runs" / f"growth-in-{side}"
    into.mkdir(parents=True, exist_ok=True)
    for part in sorted(data_dir.glob("part-*.json")):
        name = f"{uuid.uuid4().hex}.json" if side == "unordered" else f"r{n:03d}-{part.name}"
        (into / name).hardlink_to(part)
    return into


def add_held(spark: SparkSession, errors: Path, count: int, *, folder: Path | None) -> None:
    """``count`` more rows in the error table ``errors``, of the job's own DAG, in 8 files: of
    files named at random in ``folder``, else of files named before any new one."""
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(str(errors))
    first = table.first()
    assert first is not None, "the first run rejected nothing"
    ids = spark.range(count)
    digest = F.sha2(F.col("id").cast("string"), 256)
    if folder is None:
        origin = F.concat(F.lit(EARLIER), F.format_string("part-%05d.json", F.col("id") % 1000))
    else:  # ~1000 files' names, in no order, among the new ones'
        origin = F.concat(
            F.lit(f"file://{folder}/"),  # as Spark names the files it reads
            F.substring(F.sha2((F.col("id") % 1000).cast("string"), 256), 1, 32),
            F.lit(".json"),
        )
    made = {
        "job": F.lit(first["job"]),
        "dag": F.lit(first["dag"]),
        "record": F.lit(HELD_RECORD),
        "record_id": F.concat(digest, F.lit("-1")),
        "origin": origin,
    }
    rows = ids.select(*[made.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in table.schema])
    rows.repartition(8).write.format("delta").mode("append").save(str(errors))


def batch_rejects(errors: Path) -> int:
    """The error table's rows of the runs' own batches (not the held ones), read with ``deltalake``."""
    from deltalake import DeltaTable

    records = DeltaTable(str(errors)).to_pyarrow_table(columns=["record"]).column("record").to_pylist()
    return sum(1 for r in records if r != HELD_RECORD)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--held", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    data_dir, manifest = ensure_data(args.records)
    from bench.session import start_spark
    from engine.state.store import InMemoryMetadataStore

    spark = start_spark()
    shutil.rmtree(OUT / "runs", ignore_errors=True)
    stores = {side: InMemoryMetadataStore() for side in SIDES}
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    ok = True
    for n in range(args.rounds + 1):
        for side in rotated(list(SIDES), n):
            into = steady_round(data_dir, side, n)
            started = time.perf_counter()
            outputs = run_engine_plain(spark, str(into), OUT / "runs" / f"growth-{side}", "DISK_ONLY", stores[side])
            took = time.perf_counter() - started
            if n == 0:
                if side != "empty":
                    add_held(spark, outputs.errors, args.held, folder=into if side == "unordered" else None)
            else:
                seconds[side].append(took)
            found, wanted = batch_rejects(outputs.errors), manifest["errors"] * (n + 1)
            ok &= found == wanted
            label = "first (untimed)" if n == 0 else f"round {n}"
            print(f"{label:16} {side:10} {took:6.2f}s  batch rejects held {found:,} (want {wanted:,})", flush=True)
    medians = {side: statistics.median(t) for side, t in seconds.items()}
    print(
        f"median: empty {medians['empty']:.2f}s, held {medians['held']:.2f}s, unordered {medians['unordered']:.2f}s; "
        f"held/empty = {medians['held'] / medians['empty']:.3f}, unordered/empty = "
        f"{medians['unordered'] / medians['empty']:.3f}"
    )
    figures = {
        "records": args.records,
        "held": args.held,
        "rounds": args.rounds,
        "seconds": seconds,
        "held_ratio": round(medians["held"] / medians["empty"], 3),
        "unordered_ratio": round(medians["unordered"] / medians["empty"], 3),
        "counts_match": ok,
    }
    print(json.dumps(figures))
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
