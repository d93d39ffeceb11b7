"""One reading of a path or URL: plain paths made absolute, ``file:`` URLs local, object store URLs
compared as places whatever connector name or spelling they use. Pure Python, no JVM."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.storage.paths import StoragePath, is_relative, resolving_once, under


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        pytest.param("/data/in", ("file", "", "/data/in"), id="plain-absolute"),
        pytest.param("/data/in/", ("file", "", "/data/in"), id="trailing-slash"),
        pytest.param("//data//in", ("file", "", "/data/in"), id="doubled-slashes"),
        pytest.param("/data/x/../in/.", ("file", "", "/data/in"), id="dot-segments"),
        pytest.param("/..", ("file", "", "/"), id="above-the-root"),
        pytest.param("file:/data/in", ("file", "", "/data/in"), id="file-hadoop-form"),
        pytest.param("file:///data/in", ("file", "", "/data/in"), id="file-url"),
        pytest.param("FILE:///data/in/", ("file", "", "/data/in"), id="file-url-upper-case"),
        pytest.param("file:/data/x/../in", ("file", "", "/data/in"), id="file-dot-dot"),
        pytest.param("s3://b", ("s3", "b", "/"), id="s3-bucket"),
        pytest.param("s3://b/k", ("s3", "b", "/k"), id="s3-key"),
        pytest.param("s3a://b/k/", ("s3a", "b", "/k"), id="s3a-trailing-slash"),
        pytest.param("S3A://b//k", ("s3a", "b", "/k"), id="s3a-upper-case-doubled-slash"),
        pytest.param("s3://user@b/k", ("s3", "user@b", "/k"), id="user-kept-in-the-authority"),
        pytest.param("hdfs://nn:8020/p", ("hdfs", "nn:8020", "/p"), id="host-and-port"),
        pytest.param("hdfs:/p", ("hdfs", "", "/p"), id="url-without-authority"),
    ],
)
def test_parts_of_a_path_or_url(text: str, parts: tuple[str, str, str]) -> None:
    parsed = StoragePath.parse(text)
    assert (parsed.scheme, parsed.authority, parsed.path) == parts


@pytest.mark.parametrize(
    ("text", "written"),
    [
        pytest.param("orders", "{base}/orders", id="relative"),
        pytest.param("./a/../orders/", "{base}/orders", id="relative-normalised"),
        pytest.param("..", "{parent}", id="the-parent"),
        pytest.param("/data/x/../in/", "/data/in", id="absolute-normalised"),
        pytest.param("file:/data/x/../in/", "file:/data/x/../in/", id="file-url-as-given"),
        pytest.param("s3a://b/k/", "s3a://b/k/", id="url-as-given"),
    ],
)
def test_what_it_is_written_back_as(tmp_path: Path, text: str, written: str) -> None:
    parsed = StoragePath.parse(text, base=tmp_path)
    assert str(parsed) == written.format(base=tmp_path, parent=tmp_path.parent)


def test_a_relative_path_is_resolved_against_the_working_directory_by_default() -> None:
    assert StoragePath.parse("a/b").local == os.path.join(os.getcwd(), "a/b")


def test_resolving_follows_symbolic_links_of_relative_and_absolute_paths(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert str(StoragePath.parse("link/x", base=tmp_path, resolve=True)) == str(tmp_path / "real" / "x")
    assert str(StoragePath.parse(f"{tmp_path}/link/x", resolve=True)) == str(tmp_path / "real" / "x")
    assert str(StoragePath.parse("link/x", base=tmp_path)) == str(tmp_path / "link" / "x"), "not without"
    assert str(StoragePath.parse("file:link/x", base=tmp_path, resolve=True)) == "file:link/x", "a URL as given"


def test_a_relative_file_url_follows_its_base_each_time(tmp_path: Path) -> None:
    """Absolute paths and URLs are read once and reused; a relative ``file:`` URL depends on its
    base, so it is never taken from what was read before."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert StoragePath.parse("file:x", base=one).path == f"{one}/x"
    assert StoragePath.parse("file:x", base=two).path == f"{two}/x"
    assert StoragePath.parse("x", base=two).path == f"{two}/x"
    assert StoragePath.parse("/a/../b").path == StoragePath.parse("/a/../b").path == "/b"


def test_resolving_once_keeps_the_first_reading_of_a_link_within_the_block(tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "first")
    memo: dict[str, str] = {}
    with resolving_once(memo):
        assert StoragePath.parse("link/x", base=tmp_path, resolve=True).path == f"{tmp_path}/first/x"
        link.unlink()
        link.symlink_to(tmp_path / "second")
        assert StoragePath.parse("link/x", base=tmp_path, resolve=True).path == f"{tmp_path}/first/x", "kept"
    assert StoragePath.parse("link/x", base=tmp_path, resolve=True).path == f"{tmp_path}/second/x", "read again"
    with resolving_once({}):
        assert StoragePath.parse("link/x", base=tmp_path, resolve=True).path == f"{tmp_path}/second/x"
    assert memo == {f"{tmp_path}/link/x": f"{tmp_path}/first/x"}


@pytest.mark.parametrize(
    ("text", "local"),
    [
        pytest.param("/data/in", "/data/in", id="plain"),
        pytest.param("file:/data/in", "/data/in", id="file-hadoop-form"),
        pytest.param("file:///data/in", "/data/in", id="file-url"),
        pytest.param("file://data/in", "/data/in", id="file-two-slashes-read-as-a-path"),
        pytest.param("s3://b/k", None, id="s3"),
        pytest.param("abfss://c@acct.dfs.core.windows.net/p", None, id="azure"),
        pytest.param("jdbc:postgresql://h/db", None, id="not-a-path-at-all"),
    ],
)
def test_which_paths_are_local(text: str, local: str | None) -> None:
    parsed = StoragePath.parse(text)
    assert (parsed.local, parsed.is_local) == (local, local is not None)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param("s3://b/k", "s3a://b/k/", True, id="s3-and-s3a"),
        pytest.param("s3n://b/k", "s3://b/k", True, id="s3n"),
        pytest.param("s3://u@b/k", "s3://b/k", True, id="user-ignored"),
        pytest.param("s3://b/k", "s3://b/k/x/..", True, id="dot-dot"),
        pytest.param("file:/data/in", "/data/in", True, id="file-hadoop-form-is-the-plain-path"),
        pytest.param("file:///data/in/", "/data//in", True, id="file-url-is-the-plain-path"),
        pytest.param("s3://b/k", "s3://c/k", False, id="another-bucket"),
        pytest.param("s3://b/k", "/k", False, id="another-file-system"),
        pytest.param("gs://b/k", "s3://b/k", False, id="another-store"),
    ],
)
def test_places_compare_however_they_are_written(a: str, b: str, same: bool) -> None:
    assert (StoragePath.parse(a).place == StoragePath.parse(b).place) is same


def test_equality_is_of_the_parts_not_the_text() -> None:
    assert StoragePath.parse("s3a://b/k/") == StoragePath.parse("s3a://b//k")
    assert StoragePath.parse("s3a://b/k") != StoragePath.parse("s3://b/k"), "the place folds s3a, equality not"
    assert StoragePath.parse("file:/x") == StoragePath.parse("/x")


@pytest.mark.parametrize(
    ("text", "relative"),
    [
        pytest.param("orders", True, id="plain"),
        pytest.param("./_engine/./state/", True, id="dot-segments"),
        pytest.param("/orders", False, id="absolute"),
        pytest.param("file:/orders", False, id="file-hadoop-form"),
        pytest.param("s3://b/orders", False, id="url"),
    ],
)
def test_which_paths_are_relative(text: str, relative: bool) -> None:
    assert is_relative(text) is relative


@pytest.mark.parametrize(
    ("text", "root", "placed"),
    [
        pytest.param("orders", "/lake", "/lake/orders", id="local-warehouse"),
        pytest.param("orders/", "/lake/", "/lake/orders/", id="as-written"),
        pytest.param("./_engine/./state", "/lake", "/lake/./_engine/./state", id="not-normalised"),
        pytest.param("orders", "s3a://b/wh/", "s3a://b/wh/orders", id="s3-warehouse"),
        pytest.param("orders", "file:/lake", "file:/lake/orders", id="file-warehouse"),
        pytest.param("/data/orders", "s3a://b/wh", "/data/orders", id="absolute-as-it-is"),
        pytest.param("file:/data/orders", "/lake", "file:/data/orders", id="file-url-as-it-is"),
        pytest.param("s3://c/orders", "/lake", "s3://c/orders", id="url-as-it-is"),
    ],
)
def test_placing_under_the_warehouse(text: str, root: str, placed: str) -> None:
    assert under(text, root) == placed


@pytest.mark.parametrize(
    ("start", "names", "written", "place"),
    [
        pytest.param(
            "/lake/", ("_engine", "state"), "/lake/_engine/state", ("file", "", "/lake/_engine/state"), id="local"
        ),
        pytest.param("file:/lake", ("a/",), "file:/lake/a/", ("file", "", "/lake/a"), id="file-url"),
        pytest.param("s3a://u@b/wh/", ("x", "..", "y"), "s3a://u@b/wh/x/../y", ("s3", "b", "/wh/y"), id="s3"),
    ],
)
def test_join(start: str, names: tuple[str, ...], written: str, place: tuple[str, str, str]) -> None:
    joined = StoragePath.parse(start).join(*names)
    assert (str(joined), joined.place) == (written, place)
