"""Bytes that are not UTF-8 in a rejected record (issue 58, item 5): the error table stays readable
by any reader (delta-rs, pyarrow), keeps the bytes as read, gives the true reason, and a replay
with the right encoding publishes the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable

from engine.sources.record_errors import NOT_UTF8
from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with

LATIN1 = '{"id": 2, "name": "Zoë"}\n'.encode("latin-1")  # \xeb: not UTF-8


def job(inputs: Path) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(inputs), "schema": "id INT, name STRING"}},
        "sinks": {"lake": {"type": "delta", "path": "lake"}},
    }


def test_a_record_that_is_not_utf8_is_kept_readably_with_its_bytes_and_the_true_reason(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_bytes(b'{"id": 1, "name": "ok"}\n' + LATIN1 + b'{"id": 3, "name": "fine"}\n')
    summary = run_with(spark, job(tmp_path / "in"), lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 1), summary
    table = lake / "_errors" / "t"
    (row,) = DeltaTable(str(table)).to_pyarrow_table().to_pylist()  # delta-rs reads every column
    assert row["record_bytes"] == LATIN1.rstrip(b"\n")
    assert row["record"] == '{"id": 2, "name": "Zo\ufffd"}'
    assert row["reasons"] == [f"read: {NOT_UTF8}"], "not `id`'s fault"
    for data in (f for f in table.rglob("*.parquet") if "_delta_log" not in f.parts):
        assert pq.read_table(data).column("record").to_pylist()  # pyarrow decodes the text column
    assert sorted(DeltaTable(str(lake / "lake")).to_pyarrow_table().column("id").to_pylist()) == [1, 3]


def test_a_replay_with_the_files_encoding_publishes_the_record_as_it_was_written(spark: Any, tmp_path: Path) -> None:
    import yaml

    from tests.commit.harness import run_here

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    (wh / "in").mkdir(parents=True)
    (wh / "in" / "a.json").write_bytes(b'{"id": 1, "name": "ok"}\n' + LATIN1)
    spec = job(wh / "in")
    jobs.mkdir()
    (jobs / "crash.yaml").write_text(yaml.safe_dump(spec))
    code, first = run_here(jobs, wh)
    assert (code, first["errors"]) == (0, 1), first
    spec["sources"]["in"]["options"] = {"encoding": "ISO-8859-1"}  # the fix: the files' own encoding
    (jobs / "crash.yaml").write_text(yaml.safe_dump(spec))
    code, replayed = run_here(jobs, wh, "mode=replay", "replay.step=read")
    assert code == 0, replayed
    rows = sorted(DeltaTable(str(wh / "lake")).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "ok"}, {"id": 2, "name": "Zoë"}]
