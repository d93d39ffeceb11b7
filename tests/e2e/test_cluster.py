"""The demo job through ./spark-submit.sh on a real Spark standalone cluster (tests/cluster.py: a master and one
worker on loopback) writes the same outputs as with ``--master local[2]``; outputs read with delta-rs/pyarrow."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.cluster import StandaloneCluster
from tests.helpers import run_cli
from tests.s3 import S3Server

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
# columns of the error table that differ between two runs of the same input
RUN_COLUMNS = ("run_id", "error_time")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and one worker (2 cores, 2g) for this module; stopped, with its executors, even when a test fails.
    The worker and its executors do not see ``<base>/driver-only`` (as on another machine); the driver does."""
    base = tmp_path_factory.mktemp("cluster")
    with StandaloneCluster(base, hidden=base / "driver-only") as running:
        yield running


def demo(master: str, *overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The demo job through ./spark-submit.sh on ``master``, as a user runs it."""
    return subprocess.run(
        [
            str(REPO / "spark-submit.sh"),
            "--master", master,
            "--driver-memory", "1g",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.executor.memory=1g",
            "job=demo/orders",
            *overrides,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )  # fmt: skip


def submit(master: str, warehouse: Path) -> dict[str, Any]:
    """Run the demo job as a user does; its run summary (the last line on stdout) once it exited 0."""
    proc = demo(master, f"warehouse={warehouse}")
    output = proc.stdout + proc.stderr  # spark-submit's Python runner merges the driver's stderr into stdout
    assert proc.returncode == 0, f"{master}: exit {proc.returncode}\n{output[-5000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(summary, dict)
    assert summary["status"] == "SUCCEEDED", f"{master}: {summary}"
    return summary


def delta(path: Path) -> pa.Table:
    return DeltaTable(str(path)).to_pyarrow_table()


def by_order_id(table: pa.Table) -> list[dict[str, Any]]:
    return list(table.sort_by("order_id").to_pylist())


def error_records(path: Path) -> list[str]:
    """The error table's rows without the per-run columns, as sortable JSON (``reasons`` is a list)."""
    rows = delta(path).drop_columns(list(RUN_COLUMNS)).to_pylist()
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def completed_app(cluster: StandaloneCluster, timeout: float = 60) -> dict[str, Any]:
    """The one application the master saw finish (a driver unregisters as it stops; allow for a lag)."""
    deadline = time.monotonic() + timeout
    while not (state := cluster.state())["completedapps"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not state["activeapps"], state["activeapps"]
    (app,) = state["completedapps"]
    assert isinstance(app, dict)
    return app


def local_run(warehouse: Path) -> dict[str, Any]:
    """The demo job's command line in this process, on the test session's Spark (``local[2]``): its
    run summary once it exited 0."""
    code, summary, said = run_cli(REPO / "jobs", "job=demo/orders", f"warehouse={warehouse}")
    assert code == 0, f"local[2]: exit {code}\n{said[-5000:]}"
    assert summary["status"] == "SUCCEEDED", f"local[2]: {summary}"
    return summary


def test_demo_job_on_a_standalone_cluster_writes_what_local_mode_writes(
    cluster: StandaloneCluster, spark: object, tmp_path: Path
) -> None:
    """A process for the cluster run: a standalone cluster runs a driver that ``spark-submit.sh``
    submits to its master, with executors of its own. The ``local[2]`` run it is compared with is
    the same command line in this process, on the test session's Spark (outputs are compared by
    content, sorted by ``order_id``: the partitioning does not matter)."""
    on_cluster = submit(cluster.master_url, tmp_path / "cluster")
    local = local_run(tmp_path / "local")

    # it really ran on the cluster: the master saw the application finish, and the worker launched its executors
    app = completed_app(cluster)
    assert (app["name"], app["state"]) == ("engine", "FINISHED"), app
    executor_logs = list((cluster.work_dir / app["id"]).glob("*/stderr"))
    assert executor_logs, f"no executor of {app['id']} in {cluster.work_dir}"
    assert any("Finished task" in log.read_text(errors="replace") for log in executor_logs), executor_logs

    assert on_cluster["sinks"] == local["sinks"] == {"orders.lake": 40, "orders.big_orders": 15}
    assert (on_cluster["records_read"], on_cluster["errors"]) == (local["records_read"], local["errors"]) == (48, 7)

    cluster_wh, local_wh = tmp_path / "cluster", tmp_path / "local"
    orders = delta(cluster_wh / "orders")
    assert orders.schema == delta(local_wh / "orders").schema
    assert by_order_id(orders) == by_order_id(delta(local_wh / "orders"))
    assert [r["order_id"] for r in by_order_id(orders)] == list(range(1, 41))

    big = pq.read_table(cluster_wh / "extracts" / "big_orders")
    assert big.schema == pq.read_table(local_wh / "extracts" / "big_orders").schema
    assert by_order_id(big) == by_order_id(pq.read_table(local_wh / "extracts" / "big_orders"))
    assert big.num_rows == 15

    errors = error_records(cluster_wh / "_errors" / "orders")
    assert len(errors) == 7
    assert errors == error_records(local_wh / "_errors" / "orders")
    assert {r["run_id"] for r in delta(cluster_wh / "_errors" / "orders").to_pylist()} == {on_cluster["run_id"]}


@pytest.mark.s3
def test_a_job_whose_input_and_warehouse_are_on_s3_runs_on_the_cluster(
    cluster: StandaloneCluster, s3_server: S3Server, bucket: str, tmp_path: Path
) -> None:
    """Executors reach the lake through the run's S3 connection alone (the worker has no AWS_*
    variables, the data is not on any disk they share with the driver)."""
    client = s3_server.client()
    client.upload_file(str(REPO / "jobs" / "demo" / "data" / "orders.json"), bucket, "landing/orders.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["ENGINE_CONNECTIONS_DIR"] = str(s3_server.connection(tmp_path / "connections", bucket).parent)
    wh = f"s3a://{bucket}/lake"
    source = f"job.sources.orders.path=s3a://{bucket}/landing/orders.json"
    proc = demo(cluster.master_url, source, f"warehouse={wh}", "storage.connections=[lake_s3]", "progress=off", env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["sinks"] == {"orders.lake": 40, "orders.big_orders": 15}
    assert cluster.state()["completedapps"], "it ran on the cluster"
    options = s3_server.storage_options()
    orders = DeltaTable(f"{wh}/orders", storage_options=options).to_pyarrow_table()
    assert sorted(orders.column("order_id").to_pylist()) == list(range(1, 41))


def test_a_local_warehouse_the_executors_cannot_see_is_refused_before_anything_is_written(
    cluster: StandaloneCluster,
) -> None:
    """Runs last in this module (the first test counts the cluster's applications)."""
    assert cluster.hidden is not None
    warehouse = cluster.hidden / "lake"
    proc = demo(cluster.master_url, f"warehouse={warehouse}", "progress=off")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-5000:]
    assert f"the warehouse {warehouse} is on the driver's local disk, and the executors on" in output
    assert "key `warehouse`" in output, output[-3000:]
    assert cluster.state()["completedapps"], "it ran on the cluster"
    left = sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("*")) if warehouse.exists() else []
    assert left == ["_engine"], left  # the probe is gone; no table, no lease, no state
