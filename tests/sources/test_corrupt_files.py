"""A file that cannot be read: ``on_corrupt = fail`` (default) fails its dataset with a message
saying which key to set; ``on_corrupt = skip`` reads the rest and records the file in the error
table, the dataset's status and the file log (so it is not read again until it is replaced).

Found on real data: one truncated ``.json.gz`` failed its dataset on every run, and the message
named the file but offered no way forward."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from engine.state.delta_store import DeltaMetadataStore
from tests.helpers import delta_ids, run_with

T0 = float(int(time.time()) - 86_400)


def gz_lines(ids: range) -> bytes:
    return gzip.compress("".join(json.dumps({"id": i, "v": "x" * 40}) + "\n" for i in ids).encode())


def put(path: Path, data: bytes, *, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def job(glob: Path, fmt: str = "json", **source: Any) -> dict[str, Any]:
    conf = {"type": "files", "format": fmt, "path": str(glob), "schema": "id INT, v STRING", **source}
    return {"sources": {"in": conf}, "sinks": {"out": {"type": "delta", "path": "out"}}}


def table(lake: Path, *parts: str) -> list[dict[str, Any]]:
    return DeltaTable(str(lake.joinpath(*parts))).to_pyarrow_table().to_pylist()


def test_a_truncated_gzip_is_skipped_recorded_and_not_read_again_until_replaced(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    put(land / "a.json.gz", gz_lines(range(0, 5)), mtime=T0)
    whole = gz_lines(range(100, 3000))
    broken = put(land / "b.json.gz", whole[: len(whole) // 2], mtime=T0 + 60)
    put(land / "c.json.gz", gz_lines(range(5, 8)), mtime=T0 + 120)

    first = run_with(spark, job(land / "*.json.gz", on_corrupt="skip"), lake, store, run=1)
    again = run_with(spark, job(land / "*.json.gz", on_corrupt="skip"), lake, store, run=2)

    assert first.summary()["status"] == "SUCCEEDED"
    assert delta_ids(lake / "out") == list(range(8))  # nothing of the truncated file, not even its first lines
    (error,) = table(lake, "_errors", "t")
    assert json.loads(error["record"]) == {"file": f"file:{broken}"}
    (reason,) = error["reasons"]
    assert reason.startswith("read: file skipped (on_corrupt = skip), it cannot be read:")
    assert "b.json.gz" in reason and "EOFException" in reason
    assert first.summary()["errors"] == 1
    (outcome,) = first.dags[0].datasets
    assert outcome.message == f"skipped unreadable file(s) (on_corrupt = skip): file:{broken}"
    statuses = [s for s in table(lake, "_engine", "job_status") if s["run_id"] == "run-1"]
    assert [(s["status"], "b.json.gz" in s["message"]) for s in statuses] == [("COMMITTED", True)]
    logged = {Path(f["path"]).name: f["note"] for f in table(lake, "_engine", "files_read")}
    assert logged["a.json.gz"] == logged["c.json.gz"] == ""
    assert logged["b.json.gz"].startswith("skipped: ") and "EOFException" in logged["b.json.gz"]
    assert again.summary()["records_read"] == 0  # the skipped file counts as read

    put(broken, whole, mtime=T0 + 60)  # replaced in place, whole: a new (mtime, size)
    fixed = run_with(spark, job(land / "*.json.gz", on_corrupt="skip"), lake, store, run=3)
    assert fixed.summary()["records_read"] == 2900
    assert delta_ids(lake / "out") == list(range(8)) + list(range(100, 3000))


def test_by_default_an_unreadable_file_fails_its_dataset_saying_which_key_to_set(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    put(land / "a.json.gz", gz_lines(range(0, 5)), mtime=T0)
    whole = gz_lines(range(100, 3000))
    put(land / "b.json.gz", whole[: len(whole) // 2], mtime=T0 + 60)

    result = run_with(spark, job(land / "*.json.gz"), lake, store, run=1)

    assert result.summary()["status"] == "FAILED"
    (outcome,) = result.dags[0].datasets
    assert "b.json.gz" in outcome.message
    assert "set `job.sources.in.on_corrupt = skip` to skip it" in outcome.message
    assert not (lake / "out").exists()


@pytest.mark.parametrize(
    "schema",
    [pytest.param("id INT, v STRING", id="declared-schema"), pytest.param(None, id="inferred-schema")],
)
def test_a_broken_parquet_file_is_skipped(spark: Any, lake: Path, schema: str | None) -> None:
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    good = land / "a.parquet"
    land.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "v": ["p", "q"]}), good)
    os.utime(good, (T0, T0))
    broken = put(land / "b.parquet", b"PAR1 this is not a parquet file", mtime=T0 + 60)
    raw = job(land / "*.parquet", fmt="parquet", on_corrupt="skip")
    raw["sources"]["in"]["schema"] = schema

    result = run_with(spark, raw, lake, store, run=1)

    assert result.summary()["status"] == "SUCCEEDED"
    assert delta_ids(lake / "out") == [1, 2]
    (error,) = table(lake, "_errors", "t")
    assert json.loads(error["record"]) == {"file": f"file:{broken}"}
    assert {Path(f["path"]).name for f in table(lake, "_engine", "files_read")} == {"a.parquet", "b.parquet"}


def test_an_unknown_on_corrupt_value_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    from engine.errors import ConfigError
    from tests.helpers import compile_dict

    with pytest.raises(ConfigError, match="'fail' or 'skip'") as info:
        compile_dict(job(tmp_path / "*.json", on_corrupt="ignore"), tmp_path / "lake")
    assert info.value.key == "job.sources.in.on_corrupt"
