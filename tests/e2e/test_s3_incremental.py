"""An incremental files job whose input and warehouse are both on S3 (tests/s3.py's server): three
runs with new files landing between them, each through the CLI entry in this process. Every record
must be in the Delta sink once, each dataset's watermark at its newest file, and the bucket read
back without Spark (boto3 for the listing, delta-rs for the tables)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from tests.commit.harness import run_here
from tests.s3 import S3Server

pytestmark = pytest.mark.s3


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_three_incremental_runs_over_files_landing_on_s3(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, s3_connection: str
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    job = {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": f"s3a://{bucket}/landing",
                "datasets": "directory",
                "schema": "id BIGINT, amount DOUBLE",
            }
        },
        "converters": [{"type": "check", "expr": "amount >= 0", "reason": "negative amount"}],
        "sinks": {"lake": {"type": "delta", "path": "orders"}},
    }
    (jobs / "landing.yaml").write_text(yaml.safe_dump(job))
    client = s3_server.client()
    wh = f"s3a://{bucket}/lake"
    next_id = 1
    newest: dict[str, str] = {}

    def land(dataset: str, count: int) -> None:
        nonlocal next_id
        ids = range(next_id, next_id + count)
        body = "".join(json.dumps({"id": i, "amount": -1.0 if i % 9 == 0 else float(i)}) + "\n" for i in ids)
        key = f"landing/{dataset}/part-{next_id:05d}.json"
        client.put_object(Bucket=bucket, Key=key, Body=body.encode())
        newest[dataset] = f"s3a://{bucket}/{key}"
        next_id += count

    read = []
    for batch in ([("eu", 30), ("us", 20)], [("eu", 15)], [("us", 25), ("apac", 10)]):
        for dataset, count in batch:
            land(dataset, count)
        time.sleep(1.1)  # S3 times its objects to the second: the next files land a second later
        code, summary = run_here(jobs, wh, s3_connection, job="landing")
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
        read.append(summary["records_read"])
    assert read == [50, 15, 35], "each run reads only what landed since the last"

    options = s3_server.storage_options()
    ids = DeltaTable(f"{wh}/orders", storage_options=options).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [i for i in range(1, next_id) if i % 9], "every good record once"
    errors = DeltaTable(f"{wh}/_errors/landing", storage_options=options).to_pyarrow_table()
    assert sorted(json.loads(r)["id"] for r in errors.column("record").to_pylist()) == list(range(9, next_id, 9))
    state = DeltaTable(f"{wh}/_engine/state", storage_options=options).to_pyarrow_table().to_pylist()
    latest: dict[str, Any] = {}
    for row in sorted(state, key=lambda r: r["committed_at"]):
        latest[row["dataset"].rstrip("/").rsplit("/", 1)[-1]] = json.loads(row["watermark"])["value"]
    assert {d: mark["path"] for d, mark in latest.items()} == newest

    # a backfill of everything landed, into a table of its own: read once, resumed on a rerun, and
    # the live watermarks never move (its bookkeeping is its own scope, in the S3 warehouse)
    bounds = ["job.sources.in.from=2000-01-01T00:00:00", "job.sources.in.to=2100-01-01T00:00:00"]
    backfill = [*bounds, "job.sinks.lake.path=backfill", s3_connection]
    runs = [run_here(jobs, wh, *backfill, job="landing") for _ in range(2)]
    assert [(code, s["records_read"]) for code, s in runs] == [(0, next_id - 1), (0, 0)], runs
    refilled = DeltaTable(f"{wh}/backfill", storage_options=options).to_pyarrow_table().column("id").to_pylist()
    assert sorted(refilled) == sorted(ids)
    after = DeltaTable(f"{wh}/_engine/state", storage_options=options).to_pyarrow_table().to_pylist()
    live = [r for r in after if r["scope"] == "live"]
    assert sorted(json.dumps(r, default=str) for r in live) == sorted(json.dumps(r, default=str) for r in state)
    assert {r["scope"] for r in after} - {"live"} == {"backfill:2000-01-01T00:00:00..2100-01-01T00:00:00"}


def test_a_local_warehouse_with_its_input_and_delta_sink_on_s3(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, s3_connection: str
) -> None:
    """The reverse: the warehouse (state, commit log, error table) on the local disk, the data on S3."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    sink = f"s3a://{bucket}/tables/orders"
    job = {
        "sources": {"in": {"type": "files", "format": "json", "path": f"s3a://{bucket}/in", "schema": "id BIGINT"}},
        "converters": [{"type": "check", "expr": "id % 5 <> 0", "reason": "a multiple of five"}],
        "sinks": {"lake": {"type": "delta", "path": sink}},
    }
    (jobs / "mixed.yaml").write_text(yaml.safe_dump(job))
    body = "".join(json.dumps({"id": i}) + "\n" for i in range(1, 21))
    s3_server.client().put_object(Bucket=bucket, Key="in/part-0.json", Body=body.encode())
    wh = tmp_path / "lake"
    runs = [run_here(jobs, str(wh), s3_connection, job="mixed") for _ in range(2)]
    assert [(code, s["records_read"]) for code, s in runs] == [(0, 20), (0, 0)], runs

    ids = DeltaTable(sink, storage_options=s3_server.storage_options()).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [i for i in range(1, 21) if i % 5]
    errors = DeltaTable(str(wh / "_errors" / "mixed")).to_pyarrow_table()
    assert sorted(json.loads(r)["id"] for r in errors.column("record").to_pylist()) == [5, 10, 15, 20]
    (state,) = DeltaTable(str(wh / "_engine" / "state")).to_pyarrow_table().to_pylist()
    assert json.loads(state["watermark"])["value"]["path"] == f"s3a://{bucket}/in/part-0.json"
