"""One writer per Delta table on S3: Delta's S3 log store lets a second driver overwrite a commit,
so a run holds a writer lease on its warehouse (the ``_engine/`` tables) and on each Delta table it
writes there. Here another job's run holds one (a real lease on the session's S3 server, taken by
this process as that run would), and the job, run through the CLI entry in this process, must be
refused with exit code 3 naming the place and the holder, having written nothing; once the holder
is gone the same run publishes and gives its leases back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from engine.commit.lease import writer_lease
from engine.errors import EXIT_BUSY
from tests.commit.harness import run_here
from tests.s3 import S3Server

pytestmark = pytest.mark.s3


@pytest.fixture
def landing(s3_server: S3Server, bucket: str, tmp_path: Path) -> Path:
    """A job reading 20 records from the bucket into a Delta table outside its warehouse (run with
    the bucket's credentials from a named connection only: ``s3_connection``)."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    job = {
        "sources": {
            "in": {"type": "files", "format": "json", "path": f"s3a://{bucket}/landing", "schema": "id BIGINT"}
        },
        "sinks": {"lake": {"type": "delta", "path": f"s3a://{bucket}/shared/orders"}},
    }
    (jobs / "landing.yaml").write_text(yaml.safe_dump(job))
    body = "".join(f'{{"id": {i}}}\n' for i in range(1, 21))
    s3_server.client().put_object(Bucket=bucket, Key="landing/part-00001.json", Body=body.encode())
    return jobs


def _keys(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.mark.parametrize(
    ("held", "named"),
    [
        pytest.param("shared/orders", "s3a://{bucket}/shared/orders is being written by job other", id="table"),
        pytest.param("lake", "the warehouse s3a://{bucket}/lake (its `_engine/` tables", id="warehouse"),
    ],
)
def test_a_second_writer_of_a_delta_table_on_s3_is_refused_and_writes_nothing(
    spark: Any, s3_server: S3Server, bucket: str, landing: Path, s3_connection: str, held: str, named: str
) -> None:
    wh = f"s3a://{bucket}/lake"
    options = s3_server.storage_options()
    from engine.storage.blobs import blobs

    def files(where: str) -> Any:
        return blobs(where, options)

    table = f"s3a://{bucket}/{held}"
    kept = f"{table}/_engine/writer" if held == "lake" else None  # where a run keeps the warehouse's
    other = writer_lease(table, "other", run_id="other-run", ttl_seconds=60, files=files, where=kept)
    other.acquire()
    try:
        code, refused = run_here(landing, wh, s3_connection, job="landing")
    finally:
        other.release()
    assert code == EXIT_BUSY, refused
    message = refused["message"]
    assert named.format(bucket=bucket) in message and "run other-run" in message, message
    assert "Nothing was done" in message
    assert not _keys(s3_server, bucket, "shared/"), "nothing written to the table, no lease left on it"
    assert not _keys(s3_server, bucket, "lake/"), "no metadata written, the job's own lease given back"

    code, published = run_here(landing, wh, s3_connection, job="landing")
    assert (code, published["status"]) == (0, "SUCCEEDED"), published
    ids = DeltaTable(f"s3a://{bucket}/shared/orders", storage_options=options).to_pyarrow_table().column("id")
    assert sorted(ids.to_pylist()) == list(range(1, 21))
    lease_dirs = ("_engine_writer/", "/writer/", "/leases/")
    leases = [k for k in _keys(s3_server, bucket, "") if any(d in k for d in lease_dirs)]
    assert not leases, "every lease given back"
