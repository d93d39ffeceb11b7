"""The lake on object storage: ``warehouse=s3a://...`` through ``./spark-submit.sh`` against the
session's S3-compatible server (tests/s3.py), read back with independent clients (delta-rs and boto3
over S3, not Spark): every record once, the metadata where it belongs, one run of a job at a time."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT
from tests.s3 import S3Server

pytestmark = [pytest.mark.e2e, pytest.mark.s3]


def _env(s3: S3Server) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **s3.env()}


def submit(s3: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=_env(s3))


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(parsed, dict)
    return parsed


def table(s3: S3Server, url: str) -> DeltaTable:
    """The Delta table at ``url`` read by delta-rs with the server's endpoint (credentials: explicit)."""
    return DeltaTable(url, storage_options=s3.storage_options())


def keys(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_the_demo_job_with_its_warehouse_on_s3(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """The warehouse (state, commit log, runs, error table, the `lake` sink) on S3; the input and
    the `big_orders` Parquet sink on the local disk."""
    wh = f"s3a://{bucket}/lake"
    local = tmp_path / "big_orders"
    extract = f"job.sinks.big_orders.path={local}"
    proc = submit(s3_server, "job=demo/orders", f"warehouse={wh}", extract, "progress=off")
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary(proc)
    assert s["sinks"] == {"orders.lake": 40, "orders.big_orders": 15}
    assert (s["records_read"], s["errors"]) == (48, 7)

    orders = table(s3_server, f"{wh}/orders").to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in orders) == list(range(1, 41)), "every good order once"
    errors = table(s3_server, f"{wh}/_errors/orders").to_pyarrow_table().to_pylist()
    assert len(errors) == 7 and {e["run_id"] for e in errors} == {s["run_id"]}
    (state,) = table(s3_server, f"{wh}/_engine/state").to_pyarrow_table().to_pylist()
    assert state["dataset"] and state["watermark"], state
    runs = table(s3_server, f"{wh}/_engine/runs").to_pyarrow_table().to_pylist()
    assert "SUCCEEDED" in {r["status"] for r in runs if r["run_id"] == s["run_id"]}
    assert not keys(s3_server, bucket, "lake/extracts/"), "the Parquet sink is on the local disk"
    assert pq.read_table(local).num_rows == 15
    assert not [p for p in local.rglob("*") if "_engine_staging" in str(p)], "its staging is gone"
    assert not keys(s3_server, bucket, "lake/_engine/leases/"), "the lease is given back"
    assert not [k for k in keys(s3_server, bucket, "lake/") if "/_staging" in k or k.endswith(".tmp")]

    again = submit(s3_server, "job=demo/orders", f"warehouse={wh}", extract, "progress=off")
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary(again)["records_read"] == 0, "nothing new: the watermark on S3 was read back"
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40


def test_two_runs_of_one_job_on_an_s3_warehouse_one_is_refused(s3_server: S3Server, bucket: str) -> None:
    """The first run reaches its metadata through Spark (``metadata.backend=spark``): the other
    tests here take ``auto`` (delta-rs on S3), so both ways to the tables on S3 run a whole job."""
    wh = f"s3a://{bucket}/lake"
    first = subprocess.Popen(
        [*SUBMIT, "job=demo/orders", f"warehouse={wh}", "progress=off", "metadata.backend=spark"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=_env(s3_server),
    )
    try:
        deadline = time.monotonic() + 120
        while not keys(s3_server, bucket, "lake/_engine/leases/orders/"):
            assert first.poll() is None and time.monotonic() < deadline, "the first run never took its lease"
            time.sleep(0.2)
        second = submit(s3_server, "job=demo/orders", f"warehouse={wh}", "progress=off")
        _, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 3, second.stderr[-3000:]
    refused = summary(second)
    assert "job orders is already running" in refused["message"] and "holds its lease" in refused["message"]
    assert f"s3a://{bucket}/lake/_engine/leases/orders" in refused["message"], "it says where the lease is"
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40, "the refused run wrote nothing"


@pytest.mark.parametrize(
    ("where", "env", "needle"),
    [
        pytest.param(
            "s3a://no-such-bucket/lake", {}, "bucket `no-such-bucket` does not exist at http://", id="no-bucket"
        ),
        pytest.param(
            "s3a://{bucket}/lake",
            {"AWS_SECRET_ACCESS_KEY": "wrong"},
            "access to bucket `{bucket}` at http://127.0.0.1:{port} was refused: check the credentials",
            id="wrong-secret",
        ),
        pytest.param(
            "s3a://{bucket}/lake",
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
            "cannot reach http://127.0.0.1:9",
            id="no-server",
        ),
    ],
)
def test_a_warehouse_it_cannot_use_is_a_config_error_and_nothing_is_written(
    s3_server: S3Server, bucket: str, where: str, env: dict[str, str], needle: str
) -> None:
    wh = where.format(bucket=bucket)
    proc = subprocess.run(
        [*SUBMIT, "job=demo/orders", f"warehouse={wh}", "progress=off"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**_env(s3_server), **env},
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    message = summary(proc)["message"]
    assert needle.format(bucket=bucket, port=s3_server.port) in message, message
    assert message.startswith(wh), "it names the location"
    assert "wrong" not in proc.stdout + proc.stderr, "no credential is shown"
    assert keys(s3_server, bucket, "") == []


def test_a_named_s3_connection_with_an_encrypted_secret_key_and_no_aws_variables(
    s3_server: S3Server, bucket: str, tmp_path: Path
) -> None:
    from cryptography.fernet import Fernet

    from engine.config.secrets import MASTER_KEY_ENV, encrypt

    master = tmp_path / "master.key"
    master.write_text(Fernet.generate_key().decode())
    master.chmod(0o600)
    fernet = Fernet(master.read_text().encode())
    connections, events = tmp_path / "connections", tmp_path / "events"
    events.mkdir()
    s3_server.connection(connections, bucket, secret=encrypt(s3_server.secret_key, fernet))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # only the connection knows
    env.update({MASTER_KEY_ENV: str(master), "ENGINE_CONNECTIONS_DIR": str(connections)})
    wh = f"s3a://{bucket}/lake"
    args = ["job=demo/orders", f"warehouse={wh}", "storage.connections=[lake_s3]", "progress=off"]
    spark_conf = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{events}"]
    proc = subprocess.run([*SUBMIT, *spark_conf, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40

    secret = s3_server.secret_key
    assert secret not in proc.stdout + proc.stderr
    assert not [p for p in events.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()], "Spark's event log"
    client = s3_server.client()
    stored = [
        k
        for k in keys(s3_server, bucket, "")
        if secret.encode() in client.get_object(Bucket=bucket, Key=k)["Body"].read()
    ]
    assert stored == [], "no object in the lake holds the secret (run and status tables included)"

    s3_server.connection(connections, bucket, secret=encrypt("not-the-secret-key", fernet))
    refused = subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert refused.returncode == 2, refused.stderr[-3000:]
    message = summary(refused)["message"]
    assert "was refused: check the credentials (credentials and endpoint: connection `lake_s3`)" in message
    assert "not-the-secret-key" not in refused.stdout + refused.stderr
