"""Flows (``flow=<group>/<name>``) whose hops run where their executors say, run through the CLI
entry in this process (the test session's local Spark) and read back without Spark:

- a landing -> lake -> replica flow whose first hop's executor is a real Spark standalone cluster
  (tests/cluster.py): that hop is submitted through ./spark-submit.sh and runs on the cluster, the
  second runs here; a second run moves nothing;
- a PostgreSQL table -> lake -> S3 replica flow (the session's PostgreSQL and S3-compatible
  servers, tests/postgres.py and tests/s3.py), run twice with rows inserted in between: each row
  once in the lake (delta-rs) and once in the replica's Parquet files (boto3 + pyarrow).
"""

from __future__ import annotations

import io
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.cluster import StandaloneCluster
from tests.commit.harness import run_here
from tests.e2e import REPO
from tests.postgres import Postgres
from tests.s3 import S3Server

pytestmark = pytest.mark.e2e

LAKE_PACK = REPO / "jobs" / "templates" / "lake"
EVENT_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [{"name": "id", "type": ["null", "long"]}, {"name": "name", "type": ["null", "string"]}],
}
# What a hop submitted to the cluster gives spark-submit.sh: a small driver, one small executor,
# and the JIT's quick tier only in both (a short job on a small machine starts in half the time).
CLUSTER_SUBMIT = [
    "--total-executor-cores", "1",
    "--driver-memory", "1g",
    "--conf", "spark.executor.memory=1g",
    "--conf", "spark.ui.enabled=false",
    "--driver-java-options", "-XX:TieredStopAtLevel=1",
    "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1",
]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and one worker for this module; stopped, with its executors, even when a test fails."""
    with StandaloneCluster(tmp_path_factory.mktemp("flow-cluster")) as running:
        yield running


# -- writing the jobs dir and the topology --------------------------------------------------------


def _hocon(config: dict[str, Any]) -> str:
    """``config`` as HOCON: a line ``key = <JSON>`` per top-level key (strings quoted, so URLs and
    paths stay whole)."""
    return "".join(f"{key} = {json.dumps(value)}\n" for key, value in config.items())


def write_flow(jobs: Path, group: str, name: str, flow: dict[str, Any]) -> None:
    path = jobs / "flows" / group / f"{name}.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_hocon(flow))


def write_topology(folder: Path, nodes: dict[str, Any], edges: dict[str, Any], executors: dict[str, Any]) -> Path:
    """One topology file; a node's ``path`` may start with ``${params.warehouse}`` (kept unquoted)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = _hocon({"nodes": nodes, "edges": edges, "executors": executors})
    text = text.replace('"<WAREHOUSE>', '${params.warehouse}"')
    (folder / "graph.conf").write_text(text)
    return folder


def flow_run(jobs: Path, warehouse: Path, flow: str, topology: Path, *extra: str) -> dict[str, Any]:
    """Run ``flow`` here; its summary (the last line it printed) once it exited 0."""
    printed: list[str] = []
    code, summary = run_here(
        jobs, warehouse, f"topology_dir={topology}", "progress=off", *extra, job=f"flow={flow}", printed=printed
    )
    assert code == 0, f"exit {code}: {summary}\n" + "\n".join(printed[-20:])
    assert summary["status"] == "SUCCEEDED", summary
    return summary


def hops_of(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["jobName"]: h for h in summary["hops"]}


# -- independent readers --------------------------------------------------------------------------


def delta_ids(path: str, options: dict[str, str] | None = None) -> list[int]:
    return sorted(DeltaTable(path, storage_options=options).to_pyarrow_table().column("id").to_pylist())


def data_files(root: Path) -> list[Path]:
    """The Parquet data files below a table folder (not its log's checkpoints)."""
    return sorted(
        p for p in root.rglob("*.parquet") if not any(s.startswith(("_", ".")) for s in p.relative_to(root).parts)
    )


def parquet_ids(files: list[Path]) -> list[int]:
    return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())


def s3_keys(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def s3_data_keys(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    """The Parquet data files below ``prefix`` (a table folder; not its log's checkpoints)."""
    keys = s3_keys(s3, bucket, prefix)
    return [
        k for k in keys if k.endswith(".parquet") and not any(p.startswith("_") for p in k[len(prefix) :].split("/"))
    ]


def s3_parquet_ids(s3: S3Server, bucket: str, keys: list[str]) -> list[int]:
    client = s3.client()
    ids: list[int] = []
    for key in keys:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        ids += pq.read_table(io.BytesIO(body)).column("id").to_pylist()
    return sorted(ids)


def completed_apps(cluster: StandaloneCluster, at_least: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The applications the master saw finish, once there are ``at_least`` (a driver unregisters as
    it stops; allow for a lag)."""
    deadline = time.monotonic() + timeout
    while len(apps := cluster.state()["completedapps"]) < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
    return list(apps)


# -- 1. a hop on the standalone cluster, one here -------------------------------------------------


def test_a_hop_on_the_standalone_cluster_and_one_local(spark: Any, cluster: StandaloneCluster, tmp_path: Path) -> None:
    """``spark``: the test session's local Spark (with the engine's jars), which the flow runs in."""
    jobs = tmp_path / "jobs"
    shutil.copytree(LAKE_PACK, jobs / "templates" / "lake")  # the repo's pack: files_to_delta, table_copy
    landing, schemas = tmp_path / "landing", tmp_path / "schemas"
    landing.mkdir()
    schemas.mkdir()
    events = [{"id": i, "name": f"e{i}"} for i in range(1, 6)]
    (landing / "events.json").write_text("".join(json.dumps(e) + "\n" for e in events))
    (schemas / "events.avsc").write_text(json.dumps(EVENT_SCHEMA))
    topology = write_topology(
        tmp_path / "topology",
        nodes={
            "landing": {"kind": "folder", "properties": {"path": str(landing), "schemas": str(schemas)}},
            "lake": {"kind": "lake", "properties": {"path": "lake"}},
            "replica": {"kind": "folder", "properties": {"path": "<WAREHOUSE>/replica"}},
        },
        edges={
            "landing_to_lake": {
                "from": "landing",
                "to": "lake",
                "templates": ["lake/files_to_delta"],
                "executors": ["cluster"],
            },
            "lake_to_replica": {
                "from": "lake",
                "to": "replica",
                "templates": ["lake/table_copy"],
                "executors": ["local"],
            },
        },
        executors={
            "local": {"master": "local[*]"},
            "cluster": {"master": cluster.master_url, "submit": CLUSTER_SUBMIT},
        },
    )
    write_flow(
        jobs,
        "e2e",
        "landing_to_replica",
        {"owner": "demo", "source": "landing", "destinations": ["replica"], "datasets": ["events"]},
    )
    wh = tmp_path / "wh"
    apps_before = len(cluster.state()["completedapps"])

    first = flow_run(jobs, wh, "e2e/landing_to_replica", topology)
    hops = hops_of(first)
    assert list(hops) == ["landing_to_lake", "lake_to_replica"], first
    on_cluster, here = hops["landing_to_lake"], hops["lake_to_replica"]
    assert [h["executionStatus"] for h in hops.values()] == ["SUCCEEDED", "SUCCEEDED"], first
    assert (on_cluster["executor"], here["executor"]) == ("cluster", "local")
    # the cluster hop's summary came from its own application; the local hop ran in this one
    assert on_cluster["run_id"] and on_cluster["run_id"] != first["flowExecutionId"], on_cluster
    assert here["run_id"] == first["flowExecutionId"], here
    assert on_cluster["processedCount"] == 5, on_cluster
    assert on_cluster["highWatermark"], "the cluster hop's state is the flow's, read back here"
    assert here["processedCount"] > 0, here  # the table's files, published to the replica

    # it really ran on the cluster: the master saw one more application finish, whose executor ran tasks
    apps = completed_apps(cluster, apps_before + 1)
    assert len(apps) == apps_before + 1, apps
    app = max(apps, key=lambda a: a["starttime"])
    assert app["state"] == "FINISHED", app
    executor_logs = list((cluster.work_dir / app["id"]).glob("*/stderr"))
    assert any("Finished task" in log.read_text(errors="replace") for log in executor_logs), executor_logs

    ids = [e["id"] for e in events]
    assert delta_ids(str(wh / "lake" / "events")) == ids
    replica = wh / "replica" / "events"
    assert parquet_ids(data_files(replica)) == ids, "each record once in the replica's data files"
    assert delta_ids(str(replica)) == ids, "the replica is the lake table, readable as one"

    second = flow_run(jobs, wh, "e2e/landing_to_replica", topology)
    again = hops_of(second)
    assert [h["executionStatus"] for h in again.values()] == ["SUCCEEDED", "SUCCEEDED"], second
    assert [h["processedCount"] for h in again.values()] == [0, 0], second
    assert again["landing_to_lake"]["run_id"] not in (first["flowExecutionId"], second["flowExecutionId"])
    assert len(completed_apps(cluster, apps_before + 2)) == apps_before + 2, "the hop was submitted again"
    assert delta_ids(str(wh / "lake" / "events")) == ids
    assert parquet_ids(data_files(replica)) == ids


# -- 2. PostgreSQL -> lake -> S3 replica ------------------------------------------------------------

JDBC_TEMPLATE = """
# Each dataset's database table -> a Delta table in the lake, read incrementally by a column.
parameters {
  required = [source.url, source.user, source.password, destination.path, datasets]
  defaults { column = id, partitions = 2 }
}
description = "database tables into the lake"
fan_out {
  datasets = ${params.datasets}
  template {
    sources {
      db {
        type = jdbc
        url = ${params.source.url}
        table = "{dataset}"
        user = ${params.source.user}
        password = ${params.source.password}
        incremental { column = ${params.column} }
        partitions = ${params.partitions}
      }
    }
    sinks {
      lake { type = delta, path = ${params.destination.path}"/{dataset}" }
    }
  }
}
"""


@pytest.mark.s3
def test_postgres_to_lake_to_s3_replica_exactly_once(
    spark: Any, postgres: Postgres, s3_server: S3Server, bucket: str, s3_connection: str, tmp_path: Path
) -> None:
    table = f"flow_orders_{uuid.uuid4().hex[:8]}"
    postgres.psql(f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, amount NUMERIC(10,2), note TEXT)")

    def insert(lo: int, hi: int) -> None:
        postgres.psql(f"INSERT INTO {table} SELECT g, g * 1.5, 'n' || g FROM generate_series({lo}, {hi - 1}) g")

    jobs = tmp_path / "jobs"
    shutil.copytree(LAKE_PACK, jobs / "templates" / "lake")
    (jobs / "templates" / "sql").mkdir(parents=True)
    (jobs / "templates" / "sql" / "pack.conf").write_text('owners = [data-platform]\nprincipals = ["*"]\n')
    (jobs / "templates" / "sql" / "jdbc_to_delta.conf").write_text(JDBC_TEMPLATE)
    db = {"url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    topology = write_topology(
        tmp_path / "topology",
        nodes={
            "db": {"kind": "database", "properties": db},
            "lake": {"kind": "lake", "properties": {"path": "lake"}},
            "replica": {"kind": "bucket", "properties": {"path": f"s3a://{bucket}/replica"}},
        },
        edges={
            "db_to_lake": {"from": "db", "to": "lake", "templates": ["sql/jdbc_to_delta"], "executors": ["local"]},
            "lake_to_replica": {
                "from": "lake",
                "to": "replica",
                "templates": ["lake/table_copy"],
                "executors": ["local"],
            },
        },
        executors={"local": {"master": "local[*]"}},
    )
    write_flow(
        jobs,
        "e2e",
        "db_to_replica",
        {"owner": "demo", "source": "db", "destinations": ["replica"], "datasets": [table]},
    )
    wh = tmp_path / "wh"
    run = ("e2e/db_to_replica", topology, s3_connection)  # the replica's credentials: the named connection

    insert(1, 11)
    first = hops_of(flow_run(jobs, wh, *run))
    assert [h["executionStatus"] for h in first.values()] == ["SUCCEEDED", "SUCCEEDED"], first
    assert first["db_to_lake"]["processedCount"] == 10, first["db_to_lake"]
    assert delta_ids(str(wh / "lake" / table)) == list(range(1, 11))
    keys = s3_data_keys(s3_server, bucket, f"replica/{table}/")
    assert s3_parquet_ids(s3_server, bucket, keys) == list(range(1, 11))

    insert(11, 15)
    second = hops_of(flow_run(jobs, wh, *run))
    assert [h["executionStatus"] for h in second.values()] == ["SUCCEEDED", "SUCCEEDED"], second
    assert second["db_to_lake"]["processedCount"] == 4, second["db_to_lake"]
    assert "14" in str(second["db_to_lake"]["highWatermark"]), second["db_to_lake"]
    assert second["lake_to_replica"]["processedCount"] > 0, second["lake_to_replica"]
    want = list(range(1, 15))
    assert delta_ids(str(wh / "lake" / table)) == want, "each row once in the lake"
    replica_keys = s3_data_keys(s3_server, bucket, f"replica/{table}/")
    assert set(keys) < set(replica_keys), "the first run's files stay, new ones were added"
    assert s3_parquet_ids(s3_server, bucket, replica_keys) == want, "each row once in the replica"
    options = s3_server.storage_options()
    assert delta_ids(f"s3://{bucket}/replica/{table}", options) == want, "the replica reads as the lake table"
    left = [k for k in s3_keys(s3_server, bucket, "replica/") if "_engine_staging" in k]
    assert not left, "nothing staged left in the replica"
