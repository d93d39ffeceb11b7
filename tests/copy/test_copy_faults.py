"""Copy jobs under faults and on other file systems, on real Spark and real file systems.

Each fault fails only the file set it hits, with a message naming the file; nothing of that set is
published, the other sets are, and a rerun after the fault is removed finishes the job. The target is
always read back independently (hashlib, os, tarfile, gzip, pyrage, boto3). Faults are real: an
immutable directory (``chattr +i``, root bypasses permission bits), a full tmpfs, corrupt bytes, a
wrong age key, a source file deleted between planning and copying; S3 is moto's server over HTTP.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyrage
import pytest

from engine.state.status import Status
from tests.copy.test_copy_job import Copier, checksums, copy_of, journaled, staged, tree
from tests.s3 import S3Server

pytestmark = pytest.mark.spark


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outcomes(result: Any) -> dict[str, Any]:
    return {o.unit.dataset: o for o in result.dags[0].datasets}


def under(sums: dict[str, str], prefix: str) -> dict[str, str]:
    return {k: v for k, v in sums.items() if k.startswith(prefix)}


def _root_command(*cmd: str) -> None:
    """Run a command needing root (mount, chattr); skip the test when this container does not allow it."""
    if os.geteuid() != 0:
        pytest.skip(f"`{' '.join(cmd)}` needs root (running as uid {os.geteuid()})")
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"`{' '.join(cmd)}` is not permitted here: {done.stderr.strip()}")


@contextmanager
def immutable(directory: Path) -> Iterator[None]:
    """``directory`` made immutable (no entry can be added, removed or renamed, even by root)."""
    _root_command("chattr", "+i", str(directory))
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    _root_command("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=True)  # busy: detach it now, free it when idle


# -- permission denied at the destination ---------------------------------------------------------


def test_an_immutable_target_directory_fails_its_set_and_the_rerun_finishes(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"a/1.bin": os.urandom(3000), "b/2.bin": os.urandom(3000)})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "file_set": "directory"})
    assert job.run().status == "SUCCEEDED"
    tree(src, {"a/new.bin": os.urandom(4000), "a/sub/deeper.bin": os.urandom(10), "b/new.bin": os.urandom(4000)})
    before = checksums(dst)
    locked = dst / "a"
    with immutable(locked):
        result = job.run()
        assert result.status == "PARTIAL", result.summary()
        stats = copy_of(result)
        assert (stats["file_sets_failed"], stats["file_sets_published"]) == (2, 1), stats  # a and a/sub; b
        message = result.dags[0].message
        assert f"{locked} is not writable" in message, message
        assert str(src / "a" / "new.bin") in message or str(src / "a" / "sub" / "deeper.bin") in message
        assert f"cannot publish into {locked}" in message
        after = checksums(dst)
        assert under(after, "a/") == under(before, "a/"), "nothing of the failed sets is published"
        assert not (locked / "sub").exists()
        assert under(after, "b/") == under(checksums(src), "b/"), "the other set publishes"
        assert staged(dst) == [], "the pre-check fails before any byte is staged"
    rerun = job.run()
    assert rerun.status == "SUCCEEDED", rerun.summary()
    assert copy_of(rerun)["files_copied"] == 2
    assert checksums(dst) == checksums(src)
    assert staged(dst) == []


# -- disk full while staging ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "checksum",
    [pytest.param("none", id="kernel-copy"), pytest.param("sha256", id="streamed")],
)
def test_a_full_disk_while_staging_fails_the_set_and_the_rerun_finishes(
    spark: Any, lake: Path, tmp_path: Path, checksum: str
) -> None:
    src = lake.parent / "src"
    files = tree(
        src,
        {
            "big/blob.bin": os.urandom(3 * 1024 * 1024),  # more than the 2 MiB the target has
            "small/a.bin": os.urandom(100_000),
            "small/b/c.txt": b"c\n" * 5000,
        },
    )
    with small_tmpfs(tmp_path / "full", "2m") as dst:
        job = Copier(
            spark,
            lake,
            {
                "source": str(src),
                "target": str(dst),
                "file_set": "directory",
                "verify": {"checksum": checksum},
                # one task: the big file (largest first) fails and frees its space before the small ones are
                # copied; with parallel tasks a small file could hit the full disk too, and the test would race
                "tasks": {"min_tasks": 1},
            },
        )
        result = job.run()
        assert result.status == "PARTIAL", result.summary()
        message = result.dags[0].message
        assert "No space left on device" in message and str(src / "big" / "blob.bin") in message, message
        stats = copy_of(result)
        assert (stats["files_failed"], stats["file_sets_failed"], stats["file_sets_published"]) == (1, 1, 2), stats
        assert not (dst / "big").exists()
        assert checksums(dst) == {k: sha(v) for k, v in files.items() if k.startswith("small/")}
        assert staged(dst) == [], "the failed copy's partial bytes are removed from staging"

        subprocess.run(["mount", "-o", "remount,size=64m", str(dst)], check=True)
        rerun = job.run()
        assert rerun.status == "SUCCEEDED", rerun.summary()
        assert copy_of(rerun)["files_copied"] == 1
        assert checksums(dst) == checksums(src)
        assert staged(dst) == []


# -- corrupt compressed files and archives --------------------------------------------------------


def tar_bytes(members: dict[str, bytes], *, gz: bool = False) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(out.getvalue()) if gz else out.getvalue()


def untarred(root: Path, archives: dict[str, bytes]) -> dict[str, str]:
    """sha256 by target path of what tarfile extracts from each archive into ``<its dir>/<stem>/``."""
    for rel, data in archives.items():
        stem = rel.removesuffix(".gz").removesuffix(".tgz").removesuffix(".tar")
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(root / stem, filter="data")
    return checksums(root)


def gunzipped(files: dict[str, bytes]) -> dict[str, str]:
    return {k.removesuffix(".gz"): sha(gzip.decompress(v)) for k, v in files.items()}


def _truncated_gzip() -> bytes:
    whole = gzip.compress(os.urandom(20_000))
    return whole[: len(whole) // 2]


def _truncated_tar() -> bytes:
    """Two members; cut in the middle of the second, after the first is complete."""
    whole = tar_bytes({"first.txt": b"1" * 10_000, "second.bin": os.urandom(40_000)})
    return whole[: 512 + 10_240 + 512 + 20_000]


CORRUPT = [
    pytest.param(
        [{"type": "gunzip"}],
        {"ok/x.csv.gz": gzip.compress(b"x,1\n" * 2000), "bad/y.csv.gz": _truncated_gzip()},
        "bad/y.csv.gz",
        gzip.compress(b"y,2\n" * 1000),
        gunzipped,
        id="truncated-gzip",
    ),
    pytest.param(
        [{"type": "gunzip"}],
        {"ok/x.csv.gz": gzip.compress(b"x,1\n" * 2000), "bad/y.csv.gz": b"\x1f\x8b\x08\x00 this is not deflate data"},
        "bad/y.csv.gz",
        gzip.compress(b"y,2\n" * 1000),
        gunzipped,
        id="garbage-gzip",
    ),
    pytest.param(
        [{"type": "untar"}],
        {"ok/x.tar": tar_bytes({"a/1.txt": b"one", "b.bin": os.urandom(3000)}), "bad/y.tar": _truncated_tar()},
        "bad/y.tar",
        tar_bytes({"first.txt": b"1" * 10_000, "second.bin": b"2" * 40_000}),
        None,
        id="truncated-tar",
    ),
    pytest.param(
        [{"type": "untar"}],
        {"ok/x.tar": tar_bytes({"a/1.txt": b"one"}), "bad/y.tar": os.urandom(4096)},
        "bad/y.tar",
        tar_bytes({"z.txt": b"z"}),
        None,
        id="garbage-tar",
    ),
]


@pytest.mark.parametrize(("transforms", "files", "bad", "fixed", "expect"), CORRUPT)
def test_a_corrupt_file_fails_its_set_naming_the_file_and_the_rerun_finishes(
    spark: Any,
    lake: Path,
    tmp_path: Path,
    transforms: list[dict[str, Any]],
    files: dict[str, bytes],
    bad: str,
    fixed: bytes,
    expect: Callable[[dict[str, bytes]], dict[str, str]] | None,
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, files)

    def expected(*, with_bad: bool) -> dict[str, str]:
        """What the target should hold, computed from the source files by gzip/tarfile."""
        current = {k: (src / k).read_bytes() for k in files if with_bad or k != bad}
        return expect(current) if expect else untarred(tmp_path / f"expected-{with_bad}", current)

    job = Copier(
        spark, lake, {"source": str(src), "target": str(dst), "file_set": "directory", "transforms": transforms}
    )
    result = job.run()
    assert result.status == "PARTIAL", result.summary()
    message = result.dags[0].message
    assert str(src / bad) in message and "TransformError" in message, message
    assert copy_of(result)["file_sets_failed"] == 1
    assert not (dst / "bad").exists(), "nothing of the failed set is published"
    assert checksums(dst) == expected(with_bad=False)
    assert staged(dst) == [], "what a corrupt file produced before failing is removed from staging"

    (src / bad).write_bytes(fixed)
    rerun = job.run()
    assert rerun.status == "SUCCEEDED", rerun.summary()
    assert copy_of(rerun)["files_copied"] == 1
    assert checksums(dst) == expected(with_bad=True)


# -- age keys -------------------------------------------------------------------------------------


def test_a_wrong_decryption_key_fails_the_set_without_showing_the_key_and_the_right_one_finishes(
    spark: Any, lake: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    a, b = pyrage.x25519.Identity.generate(), pyrage.x25519.Identity.generate()
    plain = {"for_a/x.json": b'{"x": 1}\n' * 500, "for_a/y.json": b"y" * 70_000, "for_b/z.json": b"z\n" * 100}
    tree(src, {f"{k}.age": pyrage.encrypt(v, [(a if "for_a" in k else b).to_public()]) for k, v in plain.items()})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "file_set": "directory"})
    with caplog.at_level(logging.DEBUG):
        result = job.run(transforms=[{"type": "decrypt", "identities": [str(b)]}])
    assert result.status == "PARTIAL", result.summary()
    message = result.dags[0].message
    assert str(src / "for_a") in message and ".json.age" in message, message
    assert copy_of(result)["files_failed"] == 2
    assert checksums(dst) == {"for_b/z.json": sha(plain["for_b/z.json"])}
    shown = [
        message,
        json.dumps(result.summary(), default=str),
        caplog.text,
        *(f"{r.body} {r.message}" for r in job.metadata.read_log("mirror")),
    ]
    for secret in (str(a), str(b)):
        assert not any(secret in text or secret.lower() in text for text in shown)
        assert not any(secret[len("AGE-SECRET-KEY-1") :][:20] in text for text in shown)

    rerun = job.run(transforms=[{"type": "decrypt", "identities": [str(a)]}])
    assert rerun.status == "SUCCEEDED", rerun.summary()
    assert checksums(dst) == {k: sha(v) for k, v in plain.items()}


def test_files_encrypted_by_the_job_decrypt_independently_to_the_source(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = tree(src, {"a.csv": b"a,1\n" * 3000, "d/b.bin": os.urandom(200_000), "d/empty": b""})
    key = pyrage.x25519.Identity.generate()
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "transforms": [{"type": "encrypt", "recipients": [str(key.to_public())]}],
        },
    )
    assert job.run().status == "SUCCEEDED"
    assert sorted(checksums(dst)) == sorted(f"{k}.age" for k in files)
    for rel, data in files.items():
        sealed = (dst / f"{rel}.age").read_bytes()
        assert sealed.startswith(b"age-encryption.org/v1\n")
        assert pyrage.decrypt(sealed, [key]) == data


def test_a_file_staged_for_the_old_recipient_is_not_reused_after_the_recipient_changes(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = tree(src, {"s/x.bin": os.urandom(3000), "s/y.bin": os.urandom(3000)})
    old, new = pyrage.x25519.Identity.generate(), pyrage.x25519.Identity.generate()
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "transforms": [{"type": "encrypt", "recipients": [str(old.to_public())]}],
        },
    )
    planned = job.plan()
    (src / "s" / "y.bin").rename(lake.parent / "y.bin")  # y vanishes: the set fails, x stays staged for `old`
    assert job.execute(planned).status == "FAILED"
    (left,) = staged(dst)
    assert left.split("/")[-1] in journaled(dst)
    (lake.parent / "y.bin").rename(src / "s" / "y.bin")

    rerun = job.run(transforms=[{"type": "encrypt", "recipients": [str(new.to_public())]}])
    assert rerun.status == "SUCCEEDED", rerun.summary()
    assert (copy_of(rerun)["files_copied"], copy_of(rerun)["files_reused"]) == (2, 0)
    for rel, data in files.items():
        assert pyrage.decrypt((dst / f"{rel}.age").read_bytes(), [new]) == data


# -- a source file that vanishes --------------------------------------------------------------------


@pytest.mark.parametrize("checksum", [pytest.param("none", id="kernel-copy"), pytest.param("md5", id="streamed")])
def test_a_source_file_deleted_after_planning_fails_its_set_and_the_rerun_finishes(
    spark: Any, lake: Path, checksum: str
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"gone/x.bin": os.urandom(5000), "gone/y.bin": os.urandom(5000), "kept/z.bin": os.urandom(5000)})
    job = Copier(
        spark, lake, {"source": str(src), "target": str(dst), "file_set": "directory", "verify": {"checksum": checksum}}
    )
    planned = job.plan()
    (src / "gone" / "x.bin").unlink()
    result = job.execute(planned)
    assert result.status == "PARTIAL", result.summary()
    message = result.dags[0].message
    assert str(src / "gone" / "x.bin") in message and "FileNotFoundError" in message, message
    assert not (dst / "gone").exists()
    assert checksums(dst) == under(checksums(src), "kept/")
    (left,) = staged(dst)  # y.bin stays staged, recorded in its task's journal, for the next run
    assert left.split("/")[-1] in journaled(dst)

    rerun = job.run()
    assert rerun.status == "SUCCEEDED", rerun.summary()
    stats = copy_of(rerun)
    assert (stats["files_copied"], stats["files_reused"]) == (0, 1)
    assert checksums(dst) == checksums(src)
    assert staged(dst) == []


# -- untar in a job -------------------------------------------------------------------------------


def test_archives_unpack_into_their_stem_as_tarfile_extracts_them(spark: Any, lake: Path, tmp_path: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    archives = tree(
        src,
        {
            "2026/logs.tar.gz": tar_bytes(
                {"app/2026/a.log": b"a\n" * 4000, "b.txt": b"b", "nested/deep/c.bin": os.urandom(70_000)}, gz=True
            ),
            "other.tar": tar_bytes({"README": b"read me", "data/empty": b""}),
        },
    )
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "transforms": [{"type": "untar"}]})
    result = job.run()
    assert result.status == "SUCCEEDED", result.summary()
    assert checksums(dst) == untarred(tmp_path / "expected", archives)
    assert sorted(checksums(dst)) == [
        "2026/logs/app/2026/a.log",
        "2026/logs/b.txt",
        "2026/logs/nested/deep/c.bin",
        "other/README",
        "other/data/empty",
    ]
    assert copy_of(job.run())["files_copied"] == 0


# -- S3 -------------------------------------------------------------------------------------------


def bucket_objects(s3_server: S3Server, bucket: str) -> dict[str, bytes]:
    client = s3_server.client()
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    ]
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


@pytest.mark.s3
@pytest.mark.parametrize("copy_object_limit", [None, 1000], ids=["move", "streamed"])
def test_a_local_tree_is_replicated_to_s3_and_staging_leaves_nothing(
    spark: Any, lake: Path, s3_server: S3Server, bucket: str, copy_object_limit: int | None, monkeypatch: Any
) -> None:
    import engine.copy.steps as steps

    streamed: list[str] = []
    if copy_object_limit is not None:  # objects over S3's CopyObject limit (5 GiB) are streamed into place
        monkeypatch.setattr(steps, "COPY_OBJECT_LIMIT", copy_object_limit)
        real = steps._stream_move
        monkeypatch.setattr(steps, "_stream_move", lambda loc, a, b: (streamed.append(b), real(loc, a, b)))
    src = lake.parent / "src"
    files = tree(
        src,
        {"d0/a.bin": os.urandom(3000), "d0/deep/b.txt": b"b\n" * 100, "d1/c.bin": os.urandom(70_000), "top.txt": b"t"},
    )
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": f"s3://{bucket}/mirror",
            "target_options": s3_server.options(),
            "verify": {"checksum": "sha256"},
        },
    )
    first = job.run()
    assert first.status == "SUCCEEDED", first.summary()
    objects = bucket_objects(s3_server, bucket)
    data = {k: sha(v) for k, v in objects.items() if not k.endswith("/")}
    assert data == {f"mirror/{k}": sha(v) for k, v in files.items()}
    markers = {k: v for k, v in objects.items() if k.endswith("/")}
    assert set(markers.values()) <= {b""}, "the rest are pyarrow's empty directory markers"
    # Nothing staged is left, not even the marker of `_engine_staging/` (pyarrow recreates a parent's
    # marker whenever it deletes a directory's last object): the mirror holds what the source holds.
    left = {k for k in objects if k.startswith("mirror/_engine_staging")}
    assert left == set(), sorted(left)
    assert sorted(p.rsplit("/", 2)[-1] for p in streamed) == ([] if copy_object_limit is None else ["a.bin", "c.bin"])

    second = job.run()
    assert second.status == "SUCCEEDED"
    assert copy_of(second)["files_copied"] == 0
    assert bucket_objects(s3_server, bucket) == objects


@pytest.mark.s3
def test_an_s3_source_is_replicated_to_a_local_target(spark: Any, lake: Path, s3_server: S3Server, bucket: str) -> None:
    dst = lake.parent / "dst"
    files = {"events/1.json": b'{"n":1}\n' * 300, "events/sub/2.bin": os.urandom(90_000), "x.txt": b"x"}
    client = s3_server.client()
    for rel, data in files.items():
        client.put_object(Bucket=bucket, Key=f"landing/{rel}", Body=data)
    job = Copier(
        spark,
        lake,
        {
            "source": f"s3://{bucket}/landing",
            "source_options": s3_server.options(),
            "target": str(dst),
            "verify": {"checksum": "sha256"},
        },
    )
    first = job.run()
    assert first.status == "SUCCEEDED", first.summary()
    assert checksums(dst) == {k: sha(v) for k, v in files.items()}
    assert staged(dst) == []
    second = job.run()
    assert second.status == "SUCCEEDED"
    assert copy_of(second)["files_copied"] == 0


# -- publish.policy = full ------------------------------------------------------------------------


def test_with_publish_policy_full_one_failing_file_publishes_nothing_and_the_rerun_publishes_all(
    spark: Any, lake: Path
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    good = {f"db/{t}/part-{i}.csv.gz": gzip.compress(f"{t},{i}\n".encode() * 300) for t in ("a", "b") for i in range(2)}
    tree(src, {**good, "db/c/part-0.csv.gz": gzip.compress(b"c\n"), "db/c/part-1.csv.gz": _truncated_gzip()})
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "datasets": {"type": "glob", "pattern": "db/*"},
            "transforms": [{"type": "gunzip"}],
        },
        publish={"policy": "full"},
    )
    result = job.run()
    assert result.status == "FAILED", result.summary()
    by_name = outcomes(result)
    assert by_name["db/c"].status == Status.FAILED and "part-1.csv.gz" in by_name["db/c"].message
    assert {by_name[d].status for d in ("db/a", "db/b")} == {Status.ROLLED_BACK}
    assert checksums(dst) == {}, "nothing at all is published"
    assert not list((lake / "_engine" / "copy_events").rglob("*.jsonl")), "no event for an unpublished set"
    left = staged(dst)  # the five good files stay staged, each recorded in its task's journal
    assert len(left) == 5 and {p.split("/")[-1] for p in left} <= journaled(dst)

    (src / "db" / "c" / "part-1.csv.gz").write_bytes(gzip.compress(b"fixed\n"))
    rerun = job.run()
    assert rerun.status == "SUCCEEDED", rerun.summary()
    stats = copy_of(rerun)
    assert (stats["files_copied"], stats["files_reused"]) == (1, 5)
    assert checksums(dst) == gunzipped({k: (src / k).read_bytes() for k in checksums(src)})
    assert staged(dst) == []
