"""engine.copy.fs on the local disk and on a real S3-compatible server (moto over HTTP, tests/s3.py).

Files are written through ``Location.fs`` and checked with an independent client: plain ``open`` on disk,
boto3 on S3."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from engine.copy.fs import FileSystemConfigError, Location, ensure_parent, list_files, missing, resolve
from tests.s3 import S3Server

REPO = Path(__file__).resolve().parents[2]
FILES = {"a.txt": b"alpha\n", "x/b.bin": bytes(range(256)) * 3, "x/y/z/c.csv": b"id,name\n1,one\n"}


@dataclass
class Place:
    """A location to test and an independent view of the same store."""

    loc: Location
    read: Callable[[str], bytes]
    """The bytes at a path within ``loc.fs``, read without pyarrow."""
    objects: Callable[[], list[str]]
    """Every file or object below the location, relative to it, seen without pyarrow."""


def _local(tmp_path: Path) -> Place:
    root = tmp_path / "root"
    root.mkdir()

    def objects() -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    return Place(resolve(str(root)), lambda path: Path(path).read_bytes(), objects)


def _s3(server: S3Server, bucket: str) -> Place:
    client = server.client()

    def read(path: str) -> bytes:
        found_bucket, _, key = path.partition("/")
        body: bytes = client.get_object(Bucket=found_bucket, Key=key)["Body"].read()
        return body

    def objects() -> list[str]:
        listed = client.list_objects_v2(Bucket=bucket, Prefix="root/").get("Contents", [])
        return sorted(o["Key"].removeprefix("root/") for o in listed)

    return Place(resolve(f"s3://{bucket}/root", server.options()), read, objects)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "local":
        return _local(tmp_path)
    return _s3(request.getfixturevalue("s3_server"), request.getfixturevalue("bucket"))


def _write(loc: Location, files: dict[str, bytes]) -> None:
    known: set[str] = set()
    for relative, data in files.items():
        path = loc.join(relative)
        ensure_parent(loc, path, known)
        with loc.fs.open_output_stream(path) as out:
            out.write(data)


def test_written_files_are_listed_with_sizes_and_read_back(place: Place) -> None:
    _write(place.loc, FILES)

    listed = list_files(place.loc, place.loc.path)

    assert [(info.path, info.size) for info in listed] == [(place.loc.join(k), len(FILES[k])) for k in sorted(FILES)]
    assert place.objects() == sorted(FILES)
    for relative, data in FILES.items():
        assert place.read(place.loc.join(relative)) == data


def test_listing_a_subdirectory_and_a_missing_root(place: Place) -> None:
    _write(place.loc, FILES)

    assert [i.path for i in list_files(place.loc, place.loc.join("x"))] == [place.loc.join("x/b.bin"),
                                                                           place.loc.join("x/y/z/c.csv")]  # fmt: skip
    assert list_files(place.loc, place.loc.join("nothing/here")) == []


def test_missing(place: Place) -> None:
    _write(place.loc, FILES)

    assert not missing(place.loc, place.loc.join("a.txt"))
    assert not missing(place.loc, place.loc.join("x/y"))  # a directory (a key prefix on S3) is not missing
    assert missing(place.loc, place.loc.join("b.txt"))
    assert missing(place.loc, place.loc.join("x/y/none.csv"))


def test_move_renames_a_file(place: Place) -> None:
    _write(place.loc, FILES)
    src, dst = place.loc.join("x/b.bin"), place.loc.join("moved/here/b.bin")

    ensure_parent(place.loc, dst, set())
    place.loc.fs.move(src, dst)

    assert missing(place.loc, src)
    assert place.read(dst) == FILES["x/b.bin"]
    # On S3 pyarrow leaves an empty marker object `x/` for the source's parent after the move (so that
    # "directory" stays): whoever moves files out of a staging prefix deletes the prefix afterwards.
    assert [o for o in place.objects() if not o.endswith("/")] == ["a.txt", "moved/here/b.bin", "x/y/z/c.csv"]
    assert [i.path for i in list_files(place.loc, place.loc.join("x"))] == [place.loc.join("x/y/z/c.csv")]


def test_a_pickled_location_works_in_another_process(place: Place) -> None:
    """Executors get the Location pickled: the copy carries the file system and its credentials."""
    code = (
        "import pickle, sys\n"
        "loc = pickle.loads(sys.stdin.buffer.read())\n"
        "with loc.fs.open_output_stream(loc.join('from-child.txt')) as out:\n"
        "    out.write(b'written by ' + loc.url.encode())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(place.loc), cwd=REPO, env=env, capture_output=True, check=False
    )

    assert done.returncode == 0, done.stderr.decode()
    assert place.read(place.loc.join("from-child.txt")) == b"written by " + place.loc.url.encode()
    copy = pickle.loads(pickle.dumps(place.loc))
    assert (copy.url, copy.path, copy.local, copy.prefix) == (
        place.loc.url,
        place.loc.path,
        place.loc.local,
        place.loc.prefix,
    )
    assert copy.fs.equals(place.loc.fs)


def test_ensure_parent_creates_missing_directories_outermost_first(tmp_path: Path) -> None:
    loc = resolve(str(tmp_path))
    known: set[str] = set()

    created = ensure_parent(loc, loc.join("a/b/c/file.txt"), known)

    assert created == [str(tmp_path / "a"), str(tmp_path / "a/b"), str(tmp_path / "a/b/c")]
    assert (tmp_path / "a/b/c").is_dir()
    assert ensure_parent(loc, loc.join("a/b/c/other.txt"), known) == []
    assert ensure_parent(loc, loc.join("a/b/d/file.txt"), set()) == [str(tmp_path / "a/b/d")]
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(NotADirectoryError, match="a file is there"):
        ensure_parent(loc, loc.join("plain/inside.txt"), set())


@pytest.mark.s3
def test_ensure_parent_creates_nothing_on_s3(s3_server: S3Server, bucket: str) -> None:
    place = _s3(s3_server, bucket)

    assert ensure_parent(place.loc, place.loc.join("a/b/file.txt"), set()) == []
    assert place.objects() == []  # no directory marker objects


@pytest.mark.s3
def test_s3a_urls_and_display(s3_server: S3Server, bucket: str) -> None:
    loc = resolve(f"s3a://{bucket}/some/prefix/", s3_server.options())
    _write(loc, {"k.txt": b"k"})

    assert (loc.path, loc.local, loc.object_store) == (f"{bucket}/some/prefix", False, True)
    assert loc.display(loc.join("k.txt")) == f"s3a://{bucket}/some/prefix/k.txt"
    assert s3_server.client().get_object(Bucket=bucket, Key="some/prefix/k.txt")["Body"].read() == b"k"


@pytest.mark.s3
def test_credentials_come_from_the_aws_environment(
    s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = s3_server.options()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options.pop("access_key"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options.pop("secret_key"))
    loc = resolve(f"s3://{bucket}/env", options)

    _write(loc, {"e.txt": b"env"})

    assert s3_server.client().get_object(Bucket=bucket, Key="env/e.txt")["Body"].read() == b"env"


def test_unknown_s3_option_names_the_key_and_the_allowed_ones() -> None:
    with pytest.raises(
        FileSystemConfigError, match=r"unknown S3 option `endpont`.*allowed: access_key, anonymous"
    ) as err:
        resolve("s3://bucket/x", {"endpont": "http://127.0.0.1:9000"})
    assert isinstance(err.value, ValueError)
    assert err.value.option == "endpont"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        pytest.param({"endpoint": "ftp://host:21"}, "not http", id="endpoint-scheme"),
        pytest.param({"endpoint": "http://host:9000/path"}, "not http", id="endpoint-path"),
        pytest.param({"anonymous": "maybe"}, "not true/false", id="flag"),
        pytest.param({"connect_timeout": "soon"}, "not a number", id="number"),
        pytest.param({"access_key": "AK"}, "together", id="half-credentials"),
    ],
)
def test_bad_s3_options(options: dict[str, str], match: str) -> None:
    with pytest.raises(FileSystemConfigError, match=match):
        resolve("s3://bucket/x", options)


def test_relative_local_paths_resolve_against_base_dir_else_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "jobs"
    monkeypatch.chdir(tmp_path)

    assert resolve("data/in/", base_dir=str(base)).path == str(base / "data/in")
    assert resolve("../data", base_dir=str(base)).path == str(tmp_path / "data")
    assert resolve("data/in").path == str(tmp_path / "data/in")
    assert resolve("/abs/path", base_dir=str(base)).path == "/abs/path"
    assert resolve(f"file://{tmp_path}/d%20e").path == str(tmp_path / "d e")
    loc = resolve("data", base_dir=str(base))
    assert (loc.local, loc.object_store, loc.display(loc.join("f"))) == (True, False, str(base / "data/f"))


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        pytest.param("file://otherhost/x", None, "names host", id="file-host"),
        pytest.param("/tmp/x", {"region": "eu"}, "takes no options", id="local-options"),
        pytest.param("s3:///key", None, "names no bucket", id="no-bucket"),
    ],
)
def test_bad_urls(url: str, options: dict[str, str] | None, match: str) -> None:
    with pytest.raises(FileSystemConfigError, match=match):
        resolve(url, options)


def test_join_refuses_to_escape(tmp_path: Path) -> None:
    loc = resolve(str(tmp_path))

    assert loc.join("a//b/./c/") == str(tmp_path / "a/b/c")
    assert loc.join() == str(tmp_path)
    assert resolve("/").join("etc") == "/etc"
    assert len({loc, resolve(str(tmp_path))}) == 1  # equal Locations hash alike (usable as keys)
    with pytest.raises(ValueError, match=r"contain `\.\.`"):
        loc.join("a/../../etc")


def test_repr_hides_the_secret_key() -> None:
    secret = "wJalrXUtnFEMI-very-secret"
    loc = resolve("s3://bucket/k", {"access_key": "AKIDEXAMPLE", "secret_key": secret, "session_token": secret})

    assert secret not in repr(loc) and secret not in str(loc) and secret not in repr(loc.fs)
    assert repr(loc) == "Location('s3://bucket/k', fs=s3, path='bucket/k')"
    with pytest.raises(FileSystemConfigError, match="credentials in the options") as err:
        resolve(f"s3://AKIDEXAMPLE:{secret}@bucket/k")
    assert secret not in str(err.value) and secret not in err.value.url


def test_other_pyarrow_file_systems_take_their_options() -> None:
    gcs = resolve("gs://bkt/a/b/", {"anonymous": True})
    assert (gcs.fs.type_name, gcs.path, gcs.display(gcs.join("c"))) == ("gcs", "bkt/a/b", "gs://bkt/a/b/c")
    abfs = resolve("abfs://box@account.dfs.core.windows.net/p", {"enable_tls": False})
    assert (abfs.fs.type_name, abfs.path) == ("abfs", "box/p")
    with pytest.raises(FileSystemConfigError, match="bogus"):
        resolve("abfs://box@account.dfs.core.windows.net/p", {"bogus": 1})
    with pytest.raises(FileSystemConfigError, match="bad GCS options"):
        resolve("gs://bkt/a", {"bogus": 1})
    assert pickle.loads(pickle.dumps(gcs)).fs.equals(gcs.fs)


def test_an_unknown_scheme_without_fsspec_names_the_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)  # what an environment without fsspec sees on import

    with pytest.raises(FileSystemConfigError, match=r"no file system for scheme `weird`.*fsspec"):
        resolve("weird://host/path")


def test_an_unknown_scheme_goes_through_fsspec() -> None:
    import fsspec

    loc = resolve("memory://copy-test/dir")
    _write(loc, {"m/n.txt": b"memory"})

    assert [(i.path, i.size) for i in list_files(loc, loc.path)] == [(loc.join("m/n.txt"), 6)]
    assert fsspec.filesystem("memory").cat(loc.join("m/n.txt")) == b"memory"
    assert isinstance(loc.fs, pafs.PyFileSystem)
