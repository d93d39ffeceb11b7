"""The lake on object storage: ``warehouse=s3a://...`` against the session's S3-compatible server
(tests/s3.py), read back with independent clients (delta-rs and boto3 over S3, not Spark): every
record once, the metadata where it belongs, one run of a job at a time.

Two runs are whole commands (``./spark-submit.sh``), each saying why in its docstring: the only
whole run that takes its credentials from the ``AWS_*`` variables, and the run whose JVM must not
show a connection's secret. Every other run goes through the CLI entry in this process (the
session's Spark): with a named connection (per-bucket keys, applied per run) wherever Spark reads or
writes S3, and with ``AWS_*`` variables set in this process where only the Python-side store check
(obstore, which reads the live environment) is reached before the run is refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.commit.harness import run_here
from tests.e2e import REPO, SUBMIT
from tests.helpers import run_cli
from tests.s3 import S3Server

pytestmark = pytest.mark.s3


def _env(s3: S3Server) -> dict[str, str]:
    """This process's environment for a whole command, with the server's ``AWS_*`` variables and
    no named connection (``ENGINE_CONNECTIONS_DIR``): the credentials come from ``AWS_*`` only."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "ENGINE_CONNECTIONS_DIR"}
    return {**kept, **s3.env()}


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


@pytest.mark.e2e
def test_the_demo_job_with_its_warehouse_on_s3(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, s3_connection: str
) -> None:
    """The warehouse (state, commit log, runs, error table, the `lake` sink) on S3; the input and
    the `big_orders` Parquet sink on the local disk.

    The first run needs a process: it is the one whole run whose credentials and endpoint come from
    the ``AWS_*`` variables, and S3A reads those when its JVM starts (``System.getenv``, and
    ``fs.s3a.endpoint`` from ``AWS_ENDPOINT_URL`` when the session is built), which the session
    this test process shares cannot show. The idle rerun runs in this process, through a named
    connection (``s3_connection``) to the same bucket."""
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

    code, again = run_here(REPO / "jobs", wh, extract, s3_connection, "progress=off", job="demo/orders")
    assert code == 0, again
    assert again["records_read"] == 0, "nothing new: the watermark on S3 was read back"
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_two_runs_of_one_job_on_an_s3_warehouse_one_is_refused(
    spark: Any, s3_server: S3Server, bucket: str, s3_connection: str
) -> None:
    """The first run reaches its metadata through Spark (``metadata.backend=spark``): the other
    tests here take ``auto`` (delta-rs on S3), so both ways to the tables on S3 run a whole job.

    Both runs go through the CLI entry in this process. While the second runs, the job's lease in
    the bucket is held as a running run holds it (a :class:`~engine.commit.lease.Lease` taken here
    through obstore, renewed by its thread): the refusal (exit code 3) is the lease's check, which
    needs no second process."""
    from engine.commit.lease import Lease
    from engine.storage.blobs import blobs

    wh = f"s3a://{bucket}/lake"
    code, first = run_here(
        REPO / "jobs", wh, s3_connection, "progress=off", "metadata.backend=spark", job="demo/orders"
    )
    assert code == 0, first
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40
    version = table(s3_server, f"{wh}/orders").version()

    leases = f"{wh}/_engine/leases/orders"
    running = Lease(
        f"{wh}/_engine",
        "orders",
        run_id="running-run",
        ttl_seconds=60,
        files=blobs(leases, s3_server.storage_options()),
    )
    running.acquire()
    try:
        assert keys(s3_server, bucket, "lake/_engine/leases/orders/"), "the lease is held in the bucket"
        code, refused = run_here(REPO / "jobs", wh, s3_connection, "progress=off", job="demo/orders")
    finally:
        running.release()
    assert code == 3, refused
    assert "job orders is already running" in refused["message"] and "holds its lease" in refused["message"]
    assert "run running-run" in refused["message"], "it names the holder"
    assert f"s3a://{bucket}/lake/_engine/leases/orders" in refused["message"], "it says where the lease is"
    assert table(s3_server, f"{wh}/orders").to_pyarrow_table().num_rows == 40, "the refused run wrote nothing"
    assert table(s3_server, f"{wh}/orders").version() == version, "not even an empty commit"


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
    spark: Any,
    s3_server: S3Server,
    bucket: str,
    s3_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    where: str,
    env: dict[str, str],
    needle: str,
) -> None:
    """In this process, with the ``AWS_*`` variables set here: the warehouse is refused by the
    Python-side store check (obstore and delta-rs read the live environment) before Spark touches
    S3. What reached the file descriptors meanwhile (the JVM's own writes) is read too (``capfd``)."""
    monkeypatch.delenv("ENGINE_CONNECTIONS_DIR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    wh = where.format(bucket=bucket)
    capfd.readouterr()  # (what came before the run)
    code, s, said = run_cli(REPO / "jobs", "job=demo/orders", f"warehouse={wh}")
    fd = capfd.readouterr()
    printed = said + fd.out + fd.err
    assert code == 2, printed[-4000:]
    message = s["message"]
    assert needle.format(bucket=bucket, port=s3_server.port) in message, message
    assert message.startswith(wh), "it names the location"
    assert "wrong" not in printed, "no credential is shown"
    assert keys(s3_server, bucket, "") == []


@pytest.mark.e2e
def test_a_named_s3_connection_with_an_encrypted_secret_key_and_no_aws_variables(
    spark: Any,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The run needs a process: Spark's event log (``spark.eventLog.enabled``) is set when a
    SparkContext starts, and the decrypted secret must be absent from everything the JVM itself
    writes (its stderr, where log4j writes directly, and its event log); only a JVM of its own,
    started for the run, shows both. The refused run (a wrong secret) runs in this process: its
    message comes from the Python-side store check, before Spark touches S3."""
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
    args = ["job=demo/orders", f"warehouse={wh}", "storage.connections=[lake_s3]"]
    spark_conf = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{events}"]
    proc = subprocess.run(
        [*SUBMIT, *spark_conf, *args, "progress=off"], capture_output=True, text=True, timeout=600, cwd=REPO, env=env
    )
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
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv(MASTER_KEY_ENV, str(master))
    monkeypatch.setenv("ENGINE_CONNECTIONS_DIR", str(connections))
    capfd.readouterr()  # (what came before: the first run's)
    code, refused, said = run_cli(REPO / "jobs", *args)
    fd = capfd.readouterr()
    printed = said + fd.out + fd.err
    assert code == 2, printed[-3000:]
    message = refused["message"]
    assert "was refused: check the credentials (credentials and endpoint: connection `lake_s3`)" in message
    assert "not-the-secret-key" not in printed
