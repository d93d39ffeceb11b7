"""More job kinds with ``warehouse=s3a://...``, each through the CLI entry in this process against
the session's S3-compatible server (tests/s3.py), credentials from a named connection only, read
back without Spark (delta-rs and boto3 over S3):

- a fan-out over datasets discovered on S3, run twice (a new file, a new dataset), then a
  ``mode=checkpoint`` rewind stored in the warehouse on S3 and the range read again;
- a copy job (the demo mirror) whose warehouse, manifests and target are on S3, the target's
  credentials too from the named connection (no ``target_options``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from tests.commit.harness import run_here
from tests.e2e import REPO
from tests.s3 import S3Server

pytestmark = pytest.mark.s3


def _ids(s3: S3Server, url: str) -> list[int]:
    return sorted(DeltaTable(url, storage_options=s3.storage_options()).to_pyarrow_table().column("id").to_pylist())


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_a_fan_out_discovered_on_s3_then_a_checkpoint_rewind_in_the_s3_warehouse(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, s3_connection: str
) -> None:
    client = s3_server.client()

    def land(key: str, ids: list[int]) -> None:
        body = "".join(json.dumps({"id": i}) + "\n" for i in ids)
        client.put_object(Bucket=bucket, Key=f"landing/{key}", Body=body.encode())

    land("clicks/1.json", [1, 2])
    land("views/1.json", [10])
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    source = {"type": "files", "format": "json", "path": "{path}/*.json", "schema": "id BIGINT"}
    job = {
        "fan_out": {
            "discover": {"type": "glob", "path": f"s3a://{bucket}/landing/*"},
            "template": {"sources": {"s": source}, "sinks": {"out": {"type": "delta", "path": "tables/{dataset}"}}},
        }
    }
    (jobs / "fan.yaml").write_text(yaml.safe_dump(job))
    wh = f"s3a://{bucket}/lake"

    code, first = run_here(jobs, wh, s3_connection, job="fan")
    assert (code, first["status"]) == (0, "SUCCEEDED"), first
    assert (_ids(s3_server, f"{wh}/tables/clicks"), _ids(s3_server, f"{wh}/tables/views")) == ([1, 2], [10])

    land("clicks/2.json", [3])
    land("orders/1.json", [7])  # a new directory: a new DAG
    code, second = run_here(jobs, wh, s3_connection, job="fan")
    assert (code, second["status"]) == (0, "SUCCEEDED"), second
    assert second["records_read"] == 2, "each DAG read only what was new to it"
    assert (_ids(s3_server, f"{wh}/tables/clicks"), _ids(s3_server, f"{wh}/tables/orders")) == ([1, 2, 3], [7])

    printed: list[str] = []
    code, status = run_here(jobs, wh, s3_connection, "mode=status", job="fan", printed=printed)
    assert code == 0, status
    marks = {d["dataset"]: d["watermark"] for d in status["datasets"]}
    (clicks,) = [d for d in marks if d.rstrip("/").endswith("landing/clicks/*.json")]
    assert marks[clicks]["path"] == f"s3a://{bucket}/landing/clicks/2.json"

    first_time = client.head_object(Bucket=bucket, Key="landing/clicks/1.json")["LastModified"]
    first_file = f"{int(first_time.timestamp() * 1000)}|s3a://{bucket}/landing/clicks/1.json"
    rewind = ["mode=checkpoint", "checkpoint.action=rewind", "checkpoint.dag=clicks"]
    code, changed = run_here(
        jobs, wh, s3_connection, *rewind, f"checkpoint.dataset={clicks}", f"checkpoint.value='{first_file}'",
        "checkpoint.reason=read clicks/2 again", job="fan",
    )  # fmt: skip
    assert (code, changed["status"]) == (0, "CHANGED"), changed
    changes = DeltaTable(f"{wh}/_engine/checkpoint_changes", storage_options=s3_server.storage_options())
    rows = changes.to_pyarrow_table().to_pylist()
    assert [(r["action"], r["dataset"], r["reason"]) for r in rows] == [("rewind", clicks, "read clicks/2 again")]

    code, third = run_here(jobs, wh, s3_connection, job="fan")
    assert (code, third["records_read"]) == (0, 1), third
    assert _ids(s3_server, f"{wh}/tables/clicks") == [1, 2, 3, 3], "the range after the rewound value, read again"


def test_a_copy_job_with_its_warehouse_and_target_on_s3(
    spark: Any, s3_server: S3Server, bucket: str, tmp_path: Path, s3_connection: str
) -> None:
    landing = REPO / "jobs" / "demo" / "data" / "landing-files"
    mirror = {  # the demo mirror (jobs/demo/mirror.conf) into the bucket: no target_options, the connection's
        "copy": {
            "source": str(landing),
            "target": f"s3://{bucket}/mirror",
            "datasets": {"type": "date_partitioned", "pattern": "*", "layout": "yyyy/MM/dd"},
            "exclude": ["_SUCCESS"],
            "verify": {"checksum": "sha256"},
        }
    }
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "mirror.yaml").write_text(yaml.safe_dump(mirror))
    wh = f"s3a://{bucket}/lake"
    code, first = run_here(jobs, wh, s3_connection, job="mirror")
    assert (code, first["status"]) == (0, "SUCCEEDED"), first
    expected = {
        str(p.relative_to(landing)): p.read_bytes() for p in landing.rglob("*") if p.is_file() and p.name != "_SUCCESS"
    }
    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix="mirror/").get("Contents", [])
    copied = {
        o["Key"].removeprefix("mirror/"): client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in listed
        if not o["Key"].endswith("/")
    }
    assert copied == expected, "every landing file once, byte for byte, nothing staged left"
    manifests = client.list_objects_v2(Bucket=bucket, Prefix="lake/_engine/").get("Contents", [])
    assert any("manifest" in o["Key"] for o in manifests), "the manifests are in the warehouse on S3"

    code, again = run_here(jobs, wh, s3_connection, job="mirror")
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    assert again["dags"][0]["copy"]["files_copied"] == 0, "the manifests on S3 were read back: nothing copied twice"
