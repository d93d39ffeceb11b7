"""Copy manifests: written as Parquet that any reader opens, and the JSON lines of earlier versions
still read, so an upgrade copies nothing again."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.copy import manifest
from engine.copy.fs import resolve
from engine.state.watermarks import ManifestWatermark
from tests.copy.test_copy_job import Copier, checksums, copy_of, sample, tree


def legacy_line(e: manifest.Entry) -> str:
    """One entry exactly as versions before the Parquet layout wrote it."""
    body = {"src": e.relative, "guid": e.guid, "size": e.size, "mtime_ns": e.mtime_ns}
    return json.dumps({**body, "out": e.outputs, "made": e.made}, separators=(",", ":"))


ENTRIES = [
    manifest.Entry("b/two.csv", "g2", 20, 2_000_000_000_123, [("b/two.csv.gz", 11)], "recipe-1"),
    manifest.Entry("a/one.tar", "g1", 10, 1_000_000_000_456, [("a/one/x.txt", 3), ("a/one/y/z.txt", 4)], "recipe-1"),
    manifest.Entry("adopted.txt", "g3", 5, 3, [("adopted.txt", 5)], ""),
]


def test_a_manifest_is_parquet_sorted_by_source_path_and_reads_back_whole(tmp_path: Path) -> None:
    loc = resolve(str(tmp_path))
    path = loc.join("m", "b000001-run.parquet")
    manifest.write(loc, path, ENTRIES)

    rows = pq.read_table(path).to_pylist()  # an independent reader
    assert [r["src"] for r in rows] == ["a/one.tar", "adopted.txt", "b/two.csv"]
    assert rows[0] == {
        "src": "a/one.tar",
        "guid": "g1",
        "size": 10,
        "mtime_ns": 1_000_000_000_456,
        "out_paths": ["a/one/x.txt", "a/one/y/z.txt"],
        "out_sizes": [3, 4],
        "made": "recipe-1",
    }
    assert manifest.read(loc, path) == {e.relative: e for e in ENTRIES}


def test_a_legacy_json_lines_manifest_reads_as_the_same_entries(tmp_path: Path) -> None:
    loc = resolve(str(tmp_path))
    old = tmp_path / "b000001-run.jsonl.gz"
    old.write_bytes(gzip.compress("".join(legacy_line(e) + "\n" for e in ENTRIES).encode()))
    assert manifest.read(loc, str(old)) == {e.relative: e for e in ENTRIES}


@pytest.mark.spark
def test_a_dataset_whose_state_names_a_legacy_manifest_copies_nothing_again(spark: Any, lake: Path) -> None:
    """With a transform nothing at the target can be adopted without the manifest, so an unread
    legacy manifest would copy every file again."""
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = tree(src, sample())
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "transforms": [{"type": "gzip"}]})
    assert job.run().status == "SUCCEEDED"
    (state,) = job.metadata.all_state("mirror")
    mark = state.watermark
    assert isinstance(mark, ManifestWatermark) and mark.path.endswith(".parquet")
    rows = pq.read_table(mark.path).to_pylist()
    assert sorted(r["src"] for r in rows) == sorted(files)
    # the state as an earlier version left it: the same entries as gzipped JSON lines
    entries = manifest.read(resolve(mark.path.rsplit("/", 1)[0]), mark.path).values()
    old = Path(mark.path).with_name("b000001-legacy.jsonl.gz")
    old.write_bytes(gzip.compress("".join(legacy_line(e) + "\n" for e in entries).encode()))
    job.metadata.save_state([dataclasses.replace(state, watermark=dataclasses.replace(mark, path=str(old)))])
    before = checksums(dst)

    again = job.run()
    assert again.status == "SUCCEEDED"
    assert copy_of(again)["files_copied"] == 0 and copy_of(again)["files_skipped"] == len(files)
    assert checksums(dst) == before

    (src / "d1" / "f1.bin").write_bytes(b"changed")
    changed = job.run()
    assert copy_of(changed)["files_copied"] == 1 and copy_of(changed)["files_skipped"] == len(files) - 1
    (state,) = job.metadata.all_state("mirror")
    assert isinstance(state.watermark, ManifestWatermark) and state.watermark.path.endswith(".parquet")
    assert len(pq.read_table(state.watermark.path)) == len(files)
    assert gzip.decompress((dst / "d1" / "f1.bin.gz").read_bytes()) == b"changed"


def test_a_manifest_missing_a_column_or_of_a_newer_layout_is_refused_not_misread(tmp_path: Path) -> None:
    loc = resolve(str(tmp_path))
    partial = tmp_path / "partial.parquet"
    pq.write_table(pa.table({"src": ["a"], "guid": ["g"], "size": [1], "mtime_ns": [2], "made": ["r"]}), partial)
    with pytest.raises(ValueError, match="`out_paths`"):
        manifest.read(loc, str(partial))

    newer = tmp_path / "newer.parquet"
    manifest.write(loc, str(newer), ENTRIES)
    table = pq.read_table(newer)
    pq.write_table(table.replace_schema_metadata({b"engine.manifest_version": b"99"}), newer)
    with pytest.raises(ValueError, match="layout 99 is newer"):
        manifest.read(loc, str(newer))


@pytest.mark.spark
def test_an_unreadable_manifest_is_named_in_a_warning_and_the_dataset_is_copied_again_whole(
    spark: Any, lake: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A manifest that is not one (a column missing) falls back to the target alone: with a
    transform nothing can be adopted, so every file is copied again, and the target ends whole."""
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = tree(src, sample())
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "transforms": [{"type": "gzip"}]})
    assert job.run().status == "SUCCEEDED"
    (state,) = job.metadata.all_state("mirror")
    assert isinstance(state.watermark, ManifestWatermark)
    pq.write_table(pa.table({"src": ["x"]}), state.watermark.path)  # damaged in place
    before = checksums(dst)

    with caplog.at_level("WARNING", logger="engine.runtime.copydag"):
        again = job.run()
    assert again.status == "SUCCEEDED"
    # Filtered by level and logger, not by text: the test's own tmp path holds "unreadable".
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "engine.runtime.copydag"]
    assert len(warned) == 1 and state.watermark.path in warned[0] and "`guid`" in warned[0]
    assert copy_of(again)["files_copied"] == len(files)
    assert checksums(dst) == before
    (state,) = job.metadata.all_state("mirror")
    assert isinstance(state.watermark, ManifestWatermark)
    assert len(pq.read_table(state.watermark.path)) == len(files)
