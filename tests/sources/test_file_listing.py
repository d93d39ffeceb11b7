"""Local listing walks the file system from Python (no Spark job); it must find exactly what
Spark's own file index finds, with the same paths, sizes and times, whatever the tree holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engine.sources.file_listing import list_files, local_listing, spark_listing
from engine.storage.filesystem import hidden
from engine.storage.hadoop import HadoopFs


def _tree(root: Path) -> None:
    files = [
        "a.json",
        "with space/b.json",
        "deep/er/c.json",
        "deep/_hidden_dir/x.json",
        "deep/.dot_dir/x.json",
        "dt=2026-01-01/d.json",
        "_part=1/e.json",  # an underscore directory holding `=` is a partition directory: visible
        "_SUCCESS",
        ".crc",
        "f.json._COPYING_",
        "_metadata",
        "g.json",
    ]
    for i, name in enumerate(files):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n" * (i + 1))
        os.utime(path, ns=(1_700_000_000_123_456_789 + i * 1_000_000_007,) * 2)
    (root / "linked").symlink_to(root / "deep" / "er", target_is_directory=True)
    (root / "dangling.json").symlink_to(root / "gone.json")  # a link to nothing: skipped by Spark


@pytest.mark.parametrize(
    "pattern",
    ["{root}", "file:{root}", "{root}/*.json", "{root}/{{deep,with space}}", "{root}/d*/**", "{root}/linked"],
)
def test_a_local_listing_finds_what_sparks_file_index_finds(spark: Any, tmp_path: Path, pattern: str) -> None:
    root = tmp_path / "in"
    _tree(root)
    patterns = [pattern.format(root=root)]
    fs = HadoopFs(spark)
    assert sorted(local_listing(fs, patterns)) == sorted(spark_listing(spark, patterns))
    assert local_listing(fs, patterns)  # every pattern finds something


def test_only_non_local_patterns_go_to_spark(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "in"
    _tree(root)
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    found = list_files(spark, [str(root)])
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before  # no Spark job
    assert {Path(p[len("file:") :]).relative_to(root).as_posix() for p, _, _ in found} == {
        "a.json",
        "with space/b.json",
        "deep/er/c.json",
        "dt=2026-01-01/d.json",
        "_part=1/e.json",
        "g.json",
        "linked/c.json",
    }


def test_hidden_names_are_sparks() -> None:
    names = ("_SUCCESS", ".x", "a._COPYING_", "_a=1", "_metadata", "a")
    assert [n for n in names if hidden(n)] == ["_SUCCESS", ".x", "a._COPYING_", "_metadata"]
