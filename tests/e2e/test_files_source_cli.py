"""The files source's ``on_corrupt`` through the command line, as a user meets it (``run_cli``: the
command line of ``./spark-submit.sh`` in this process, on the test session's Spark): a truncated
gzip fails the run with a message naming the key to set; setting it skips the file and records it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from tests.e2e import REPO
from tests.helpers import run_cli

ORDERS = REPO / "jobs" / "demo" / "data" / "orders.json"


def test_a_truncated_gzip_fails_naming_the_key_and_is_skipped_once_it_is_set(spark: Any, tmp_path: Path) -> None:
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.json.gz").write_bytes(gzip.compress(ORDERS.read_bytes()))
    whole = gzip.compress(ORDERS.read_bytes() * 50)
    (land / "b.json.gz").write_bytes(whole[: len(whole) // 2])
    wh = tmp_path / "wh"
    args = ["job=demo/orders", f"warehouse={wh}", f"job.sources.orders.path={land}/*.json.gz"]

    code, failed, output = run_cli(REPO / "jobs", *args)
    assert code == 1, output[-3000:]
    (dag,) = failed["dags"]
    assert "b.json.gz" in dag["message"] and "set `job.sources.orders.on_corrupt = skip`" in dag["message"]
    assert not (wh / "orders").exists()

    code, skipped, output = run_cli(REPO / "jobs", *args, "job.sources.orders.on_corrupt=skip")
    assert code == 0, output[-3000:]
    assert (skipped["status"], skipped["records_read"], skipped["errors"]) == ("SUCCEEDED", 49, 8)
    errors = DeltaTable(str(wh / "_errors" / "orders")).to_pyarrow_table().to_pylist()
    (file_error,) = [e for e in errors if e["record"].startswith('{"file"')]
    assert json.loads(file_error["record"])["file"].endswith("/b.json.gz")
    assert file_error["reasons"][0].startswith("read: file skipped (on_corrupt = skip)")
    assert len(DeltaTable(str(wh / "orders")).to_pyarrow_table()) == 40
