"""A file appended to after a run read it (issue 58, item 4): only its new lines are read, each
once; a file rewritten otherwise is read again whole, and the run says so. Tables read with
delta-rs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with

T0 = 1_700_000_000


def job(inputs: Path, fmt: str = "json", **source: Any) -> dict[str, Any]:
    return {
        "sources": {
            "in": {"type": "files", "format": fmt, "path": str(inputs), "schema": "id INT, name STRING", **source}
        },
        "sinks": {"lake": {"type": "delta", "path": "lake"}},
    }


def lines(first: int, last: int) -> str:
    return "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(first, last + 1))


def put(path: Path, text: str, *, mtime: float, append: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as f:
        f.write(text)
    os.utime(path, (mtime, mtime))


def ids(lake: Path) -> list[int]:
    return sorted(DeltaTable(str(lake / "lake")).to_pyarrow_table().column("id").to_pylist())


def notes(summary: dict[str, Any]) -> str:
    return " ".join(summary["dags"][0]["notes"].values())


@pytest.mark.parametrize("mtime_kept", [False, True], ids=["mtime-moves", "mtime-kept"])
def test_lines_appended_to_a_file_read_are_read_once(spark: Any, lake: Path, tmp_path: Path, mtime_kept: bool) -> None:
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "log.json"
    put(file, lines(1, 10), mtime=T0)
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=1).summary()["records_read"] == 10
    before = file.stat().st_size
    put(file, lines(11, 15), mtime=T0 if mtime_kept else T0 + 60, append=True)
    second = run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()
    assert (second["status"], second["records_read"]) == ("SUCCEEDED", 5), second
    assert ids(lake) == list(range(1, 16)), "each record once"
    assert f"grew by {file.stat().st_size - before} bytes since a run read it: only they are read" in notes(second)
    assert not (lake / "_engine" / "scratch").exists() or not any((lake / "_engine" / "scratch").rglob("*.json"))
    third = run_with(spark, job(tmp_path / "in"), lake, store, run=3).summary()
    assert third["records_read"] == 0, "nothing new"


def test_a_csv_with_a_header_appended_to_reads_the_new_lines_by_its_header(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "people.csv"
    spec = job(tmp_path / "in", "csv", options={"header": True})
    put(file, "name,id\na,1\nb,2\n", mtime=T0)  # its header in another order than the schema's
    run_with(spark, spec, lake, store, run=1)
    put(file, "c,3\nd,4\n", mtime=T0 + 60, append=True)
    second = run_with(spark, spec, lake, store, run=2).summary()
    assert second["records_read"] == 2, second
    found = sorted(DeltaTable(str(lake / "lake")).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert found == [{"id": i, "name": n} for i, n in enumerate("abcd", start=1)]


def test_a_bad_record_in_the_new_lines_names_the_file_it_was_appended_to(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "log.json"
    put(file, lines(1, 2), mtime=T0)
    run_with(spark, job(tmp_path / "in"), lake, store, run=1)
    put(file, '{"id": "x", "name": "bad"}\n' + lines(3, 3), mtime=T0 + 60, append=True)
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()["errors"] == 1
    (error,) = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    assert (
        error["origin"].endswith(f"/in/log.json#{len(lines(1, 2))}") and error["record"] == '{"id": "x", "name": "bad"}'
    )
    assert ids(lake) == [1, 2, 3]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        pytest.param(lines(1, 3), lines(1, 3).replace("n1", "nn1") + lines(4, 4), id="an-earlier-line-changed"),
        pytest.param(lines(1, 3), lines(7, 9), id="replaced-with-as-many-bytes"),
    ],
)
def test_a_file_changed_otherwise_is_read_again_whole_and_the_run_says_so(
    spark: Any, lake: Path, tmp_path: Path, first: str, then: str
) -> None:
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "log.json"
    put(file, first, mtime=T0)
    run_with(spark, job(tmp_path / "in"), lake, store, run=1)
    put(file, then, mtime=T0 + 60)
    second = run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()
    said = notes(second)
    assert "changed since a run read it" in said and "read again whole, as a new file" in said, said
    assert "sink `lake`" in said, "the sinks that now hold its earlier records twice are named"


def test_a_file_that_grows_after_the_run_planned_is_read_up_to_its_planned_size(spark: Any, tmp_path: Path) -> None:
    """Read whole, Spark read the lines added since the plan, which the file log did not record:
    the next run read them again (the reviewer's race)."""
    from engine.sources.conf import FilesSourceConf
    from engine.sources.file_listing import FileEntry
    from engine.sources.files import FilesSource
    from engine.sources.workunits import WorkUnit

    file = tmp_path / "in" / "log.json"
    put(file, lines(1, 3), mtime=T0)
    planned = FileEntry(path=f"file:{file}", size=file.stat().st_size, mtime_ms=T0 * 1000, dataset="d")
    put(file, lines(4, 5), mtime=T0 + 1, append=True)  # written to after the plan
    conf = FilesSourceConf.model_validate({"type": "files", "format": "json", "path": str(tmp_path / "in")})
    source = FilesSource(conf, name="in", key="job.sources.in", schema_ddl="id INT, name STRING")
    source.scratch = str(tmp_path / "scratch")
    schema = source.schema(spark, None)
    assert schema is not None
    read = source.read(spark, [WorkUnit("d", None, None, payload=[planned])], schema)
    assert sorted(r["id"] for r in read.collect()) == [1, 2, 3]
    assert source.scratch_used


def test_a_bad_line_in_the_new_lines_like_one_read_before_is_kept_too(spark: Any, lake: Path, tmp_path: Path) -> None:
    """An error row's id numbers equal rows of one read: the new lines' read names the byte it
    starts at, so its equal line is not taken for the earlier one."""
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "log.json"
    put(file, "{\n" + lines(1, 1), mtime=T0)
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=1).summary()["errors"] == 1
    put(file, "{\n" + lines(2, 2), mtime=T0 + 60, append=True)
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()["errors"] == 1
    found = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    assert [r["record"] for r in found] == ["{", "{"]
    assert sorted(r["origin"].rsplit("/", 1)[1] for r in found) == ["log.json", f"log.json#{len(lines(1, 1)) + 2}"]


def test_a_rewrite_that_looks_like_an_append_is_read_whole_under_changed_files_whole(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    """A producer rewriting a file in place with more lines, its old size falling where a line
    ends: by size alone an append, whose changed first lines ``tail`` would miss; ``whole`` reads it all."""
    store, file = InMemoryMetadataStore(), tmp_path / "in" / "daily.json"
    spec = job(tmp_path / "in", changed_files="whole")
    put(file, lines(1, 2), mtime=T0)
    assert run_with(spark, spec, lake, store, run=1).summary()["records_read"] == 2
    rewritten = lines(7, 8) + lines(9, 9)  # ids 1, 2 corrected to 7, 8 (the same lengths), then one more
    assert rewritten[: file.stat().st_size].endswith("\n")
    put(file, rewritten, mtime=T0 + 60)
    second = run_with(spark, spec, lake, store, run=2).summary()
    assert second["records_read"] == 3, second
    assert ids(lake) == [1, 2, 7, 8, 9], "the rewritten lines read too"
    assert "changed_files = whole" in notes(second) and "read again whole" in notes(second)
