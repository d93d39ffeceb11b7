"""The one FileSystem protocol, as each implementation keeps it: Hadoop's (what Spark sees) on a
local disk, pyarrow's on a local disk and on a real S3-compatible server (moto, credentials
checked). Files are written and checked with an independent client (``os``, pyarrow)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from engine.copy.fs import resolve
from engine.storage.arrow import ArrowFs
from engine.storage.filesystem import FileSystem, hidden
from tests.s3 import S3Server


@dataclass
class Place:
    fs: FileSystem
    root: str
    put: Callable[[str, bytes], None]
    present: Callable[[str], bool]

    def at(self, relative: str) -> str:
        return f"{self.root}/{relative}"


def _local_put(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_bytes(data)


@pytest.fixture(params=["hadoop-local", "arrow-local", "arrow-s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    root = str(tmp_path / "root")
    if request.param == "hadoop-local":
        from engine.storage.hadoop import HadoopFs

        fs: FileSystem = HadoopFs(request.getfixturevalue("spark"))
        return Place(fs, root, _local_put, os.path.lexists)
    if request.param == "arrow-local":
        return Place(ArrowFs(pafs.LocalFileSystem(), local=True), root, _local_put, os.path.lexists)
    server: S3Server = request.getfixturevalue("s3_server")
    name = request.getfixturevalue("bucket")
    loc = resolve(f"s3://{name}/root", server.options())
    assert loc.files.local is False

    def put(path: str, data: bytes) -> None:
        with loc.fs.open_output_stream(path) as out:
            out.write(data)

    def present(path: str) -> bool:  # an independent client: boto3
        listed = server.client().list_objects_v2(Bucket=name, Prefix=path.split("/", 1)[1])
        return any(o["Key"] == path.split("/", 1)[1] for o in listed.get("Contents", []))

    return Place(loc.files, loc.path, put, present)


def test_each_implementation_is_a_file_system(place: Place) -> None:
    assert isinstance(place.fs, FileSystem)


def test_size_and_existence_of_files(place: Place) -> None:
    place.put(place.at("a/x.parquet"), b"12345")
    assert place.fs.size(place.at("a/x.parquet")) == 5
    assert place.fs.size(place.at("a/nothing")) is None
    assert place.fs.exists(place.at("a/x.parquet")) and not place.fs.exists(place.at("a/nothing"))
    assert place.fs.is_file(place.at("a/x.parquet"))
    assert not place.fs.is_file(place.at("a")) and not place.fs.is_file(place.at("a/nothing"))


def test_files_skips_what_sparks_readers_skip(place: Place) -> None:
    for name in ["p=1/x.parquet", "p=1/.x.parquet.crc", "_SUCCESS", "_staging/y.parquet", "_q=2/z.parquet", "w"]:
        place.put(place.at(name), b"ab")
    assert place.fs.files(place.root) == [
        ("_q=2/z.parquet", 2),
        ("_staging/y.parquet", 2),
        ("p=1/x.parquet", 2),
        ("w", 2),
    ]
    visible = [rel for rel, _ in place.fs.files(place.root, visible_only=True)]
    assert visible == ["_q=2/z.parquet", "p=1/x.parquet", "w"]  # a partition directory is not hidden
    assert place.fs.files(place.at("missing")) == []


def test_rename_moves_a_file_into_a_new_directory(place: Place) -> None:
    place.put(place.at("staging/x"), b"abc")
    place.fs.rename(place.at("staging/x"), place.at("table/d=1/x"))
    assert place.present(place.at("table/d=1/x")) and not place.present(place.at("staging/x"))
    assert place.fs.size(place.at("table/d=1/x")) == 3


def test_delete_files_and_trees_and_what_is_gone(place: Place) -> None:
    for name in ["t/a", "t/b/c", "keep"]:
        place.put(place.at(name), b"z")
    place.fs.delete(place.at("t/a"))
    place.fs.delete(place.at("t/a"))  # gone already: nothing
    assert not place.present(place.at("t/a")) and place.present(place.at("t/b/c"))
    place.fs.delete(place.at("t"), recursive=True)
    place.fs.delete(place.at("t"), recursive=True)
    assert not place.fs.exists(place.at("t/b/c")) and place.present(place.at("keep"))


def test_delete_if_empty_keeps_a_directory_holding_anything(place: Place) -> None:
    place.put(place.at("full/x"), b"1")
    place.fs.delete_if_empty(place.at("full"))
    assert place.present(place.at("full/x"))
    place.fs.delete(place.at("full/x"))
    place.fs.delete_if_empty(place.at("full"))
    place.fs.delete_if_empty(place.at("never"))
    assert not place.fs.exists(place.at("full"))


@pytest.mark.parametrize(
    ("name", "skipped"),
    [
        pytest.param("_SUCCESS", True, id="marker"),
        pytest.param(".x.crc", True, id="checksum"),
        pytest.param("_delta_log", True, id="delta-log"),
        pytest.param("_d=2026-01-01", False, id="partition-directory"),
        pytest.param("x.json._COPYING_", True, id="being-copied"),
        pytest.param("x.json", False, id="data"),
    ],
)
def test_hidden_is_sparks_rule(name: str, skipped: bool) -> None:
    assert hidden(name) is skipped
