"""Benchmark: what the file log costs when planning a landing folder of many files.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/file_log.py                     # 20,000 files, 5 rounds
    .venv/bin/python bench/file_log.py --files 2000 --rounds 3

It writes ``--files`` small JSON files into one folder (one dataset), logs every one of them as
read in a real file log (``_engine/files_read``, a Delta table, one append as a batch would write
it), sets the dataset's watermark at the newest file, then drops one more file whose modification
time is a day older than the watermark (a late file). Each round, alternating:

- ``first run``: the files source plans the folder with no watermark (it lists and takes every
  file; the file log is not read): the cost planning had before any state existed;
- ``with log``: a fresh metadata store (tables opened cold, as a new run opens them) reads the
  file log and the files source plans the folder against it: it must find exactly the late file.

Printed: the median of each (``with log`` split into reading the log and the rest), and the ratio
with/without. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "file_log"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def landing(folder: Path, files: int) -> list[Path]:
    folder.mkdir(parents=True)
    t0 = int(time.time()) - 86_400
    paths = []
    for i in range(files):
        path = folder / f"f{i:06d}.json"
        path.write_text(json.dumps({"id": i, "v": "x"}) + "\n")
        os.utime(path, (t0 + i, t0 + i))
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from bench.session import start_spark
    from engine.sources.base import PlanContext
    from engine.sources.files import FilesSource
    from engine.sources.workunits import Budget
    from engine.spec import compile_job
    from engine.state.delta_store import DeltaMetadataStore
    from engine.state.store import LIVE, DatasetState, FileRead, utcnow
    from engine.state.watermarks import FileWatermark

    shutil.rmtree(OUT, ignore_errors=True)
    folder, engine_dir = OUT / "land", OUT / "wh" / "_engine"
    started = time.perf_counter()
    paths = landing(folder, args.files)
    print(f"wrote {args.files:,} files in {time.perf_counter() - started:.1f}s", flush=True)
    spark = start_spark("bench-file-log")
    raw = {
        "sources": {
            "in": {"type": "files", "format": "json", "path": f"{folder}/*.json", "schema": "id INT, v STRING"}
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    spec = compile_job(raw, name="bench", file=None, warehouse=str(OUT / "wh")).dags[0]
    source = FilesSource(spec.source.conf, name="in", key="job.sources.in", schema_ddl="id INT, v STRING")  # type: ignore[union-attr]
    urn = f"files:{folder}/*.json"

    store = DeltaMetadataStore(spark, str(engine_dir)).ensure()
    now = utcnow()
    store.log_files(
        [
            FileRead(
                "bench", "bench", LIVE, urn, f"file:{p}", int(p.stat().st_mtime * 1000), p.stat().st_size, 1, "r1", now
            )
            for p in paths
        ]
    )
    newest = paths[-1]
    mark = FileWatermark(int(newest.stat().st_mtime * 1000), f"file:{newest}", floor=None)
    late = folder / "late.json"
    late.write_text('{"id": -1, "v": "late"}\n')
    os.utime(late, (time.time() - 2 * 86_400,) * 2)

    def context(state: dict[str, Any], files_read: Any) -> PlanContext:
        return PlanContext(state, Budget(), Budget(), datetime.utcnow(), files_read=files_read)

    firsts, with_log, log_reads = [], [], []
    source.plan(spark, context({}, dict))  # warm-up: the JVM's first listing
    for r in range(1, args.rounds + 1):
        t = time.perf_counter()
        (unit,) = source.plan(spark, context({}, dict))
        firsts.append(time.perf_counter() - t)
        assert len(unit.payload) == args.files + 1

        t = time.perf_counter()
        fresh = DeltaMetadataStore(spark, str(engine_dir))
        logged = fresh.files_read("bench", "bench", LIVE)
        log_reads.append(time.perf_counter() - t)
        state = {urn: DatasetState("bench", "bench", LIVE, urn, mark, "r1", now)}
        (unit,) = source.plan(spark, context(state, lambda logged=logged: logged))
        with_log.append(time.perf_counter() - t)
        assert [f.path for f in unit.payload] == [f"file:{late}"], unit.payload[:3]
        print(
            f"round {r}: first run {firsts[-1]:.3f}s | with log {with_log[-1]:.3f}s "
            f"(reading {len(logged.get(urn, ())):,} logged files {log_reads[-1]:.3f}s)",
            flush=True,
        )
    first, logged_s, read_s = (statistics.median(x) for x in (firsts, with_log, log_reads))
    print(
        f"median of {args.rounds}: planning {args.files:,} files: first run {first:.3f}s, with the file log "
        f"{logged_s:.3f}s (of which reading the log {read_s:.3f}s): {logged_s / first:.2f}x",
        flush=True,
    )
    print(
        json.dumps(
            {
                "files": args.files,
                "rounds": args.rounds,
                "first_run_s": round(first, 3),
                "with_log_s": round(logged_s, 3),
                "log_read_s": round(read_s, 3),
                "ratio": round(logged_s / first, 3),
            }
        )
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
