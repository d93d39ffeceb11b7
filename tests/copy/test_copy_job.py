"""Copy jobs on real Spark and real local file systems: listing, diffing, copying on executors,
verification, per-file-set publishing through the commit log, reuse of staged files, deletions,
attributes and events. Every check reads the target back independently (hashlib, os.stat)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.runtime import JobManager
from engine.state import InMemoryRunStore
from engine.state.status import Status
from engine.state.store import InMemoryMetadataStore
from tests.helpers import compile_dict

pytestmark = pytest.mark.spark


def tree(root: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` (staging excluded), by relative path."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith("_engine_staging"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def entries(root: Path) -> dict[str, str]:
    """Everything below ``root``, staging included: each directory as ``dir``, each file by its sha256."""
    return {
        p.relative_to(root).as_posix(): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def staged(root: Path) -> list[str]:
    """The files waiting in staging (the task journals that record them aside)."""
    staging = root / "_engine_staging"
    if not staging.exists():
        return []
    return sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file() and p.suffix != ".jsonl")


def journaled(root: Path) -> set[str]:
    """The stage keys the task journals in staging record as staged and verified."""
    staging = root / "_engine_staging"
    lines = [line for p in staging.rglob("*.jsonl") for line in p.read_text().splitlines()] if staging.exists() else []
    return {json.loads(line)["key"] for line in lines}


class Copier:
    """Runs a copy job against one metadata store, like successive scheduled runs."""

    def __init__(self, spark: Any, lake: Path, copy: dict[str, Any], *, name: str = "mirror", **job: Any) -> None:
        self.spark, self.lake, self.name = spark, lake, name
        self.raw = {"copy": copy, **job}
        self.metadata = InMemoryMetadataStore()
        self.runs = 0

    def run(self, **override: Any) -> Any:
        self.runs += 1
        raw = dict(self.raw)
        raw["copy"] = {**raw["copy"], **override}
        spec = compile_dict(raw, self.lake, name=self.name)
        return JobManager(self.spark, self.metadata).run(spec, f"run-{self.runs}", InMemoryRunStore())

    def plan(self) -> Any:
        self.runs += 1
        spec = compile_dict(self.raw, self.lake, name=self.name)
        return JobManager(self.spark, self.metadata).plan(spec, f"run-{self.runs}")

    def execute(self, planned: Any) -> Any:
        return JobManager(self.spark, self.metadata).execute(planned, InMemoryRunStore())


def copy_of(result: Any) -> dict[str, Any]:
    return dict(result.summary()["dags"][0]["copy"])


def sample(n: int = 12) -> dict[str, bytes]:
    files = {f"d{i % 3}/f{i}.bin": os.urandom(1000 * i + 7) for i in range(n)}
    files["empty.txt"] = b""
    files["d0/deep/er/leaf.txt"] = b"leaf\n" * 1000
    return files


def test_a_recursive_copy_replicates_the_tree_and_an_unchanged_rerun_copies_nothing(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, sample())
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "verify": {"checksum": "sha256"}})
    first = job.run()
    assert first.status == "SUCCEEDED", first.summary()
    assert checksums(dst) == checksums(src)
    assert staged(dst) == []
    stats = copy_of(first)
    assert stats["files_copied"] == 14 and stats["files_failed"] == 0
    assert stats["bytes"] == sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    log_rows = len(job.metadata.read_log("mirror"))
    events = [
        json.loads(line)
        for f in (lake / "_engine" / "copy_events" / "mirror").glob("*.jsonl")
        for line in f.read_text().splitlines()
    ]
    assert [(e["dataset"], e["files"]) for e in events] == [("mirror", 14)]

    second = job.run()
    assert second.status == "SUCCEEDED"
    stats = copy_of(second)
    assert stats["files_copied"] == 0 and stats["files_skipped"] == 14
    assert second.dags[0].datasets[0].status == Status.EMPTY
    assert len(job.metadata.read_log("mirror")) == log_rows, "an unchanged run writes nothing to the commit log"


@pytest.mark.parametrize(
    "copy",
    [
        pytest.param({}, id="one-dataset"),
        pytest.param({"file_set": "directory"}, id="a-file-set-per-directory"),
        pytest.param({"datasets": {"type": "glob", "pattern": "*", "match": "any"}}, id="glob-datasets"),
    ],
)
def test_a_successful_copy_leaves_the_target_tree_exactly_the_source_tree(
    spark: Any, lake: Path, copy: dict[str, Any]
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, sample(5))
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), **copy})
    first = job.run()
    assert first.status == "SUCCEEDED", first.summary()
    assert entries(dst) == entries(src), "no `_engine_staging` nor anything else the source does not hold"
    (src / "d1" / "new.txt").write_bytes(b"new")
    assert job.run().status == "SUCCEEDED"
    assert entries(dst) == entries(src)


def test_new_and_changed_files_are_copied_and_deletions_only_propagate_when_asked(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, sample())
    job = Copier(spark, lake, {"source": str(src), "target": str(dst)})
    assert job.run().status == "SUCCEEDED"
    (src / "d1" / "f1.bin").write_bytes(b"changed, and shorter")
    (src / "d2" / "new.bin").write_bytes(b"new")
    (src / "d0" / "f0.bin").unlink()
    second = job.run()
    stats = copy_of(second)
    assert (stats["files_copied"], stats["files_deleted"]) == (2, 0)
    assert (dst / "d1" / "f1.bin").read_bytes() == b"changed, and shorter"
    assert (dst / "d0" / "f0.bin").exists(), "deletions are off by default"

    third = job.run(delete={"enabled": True})
    assert copy_of(third)["files_deleted"] == 1
    assert checksums(dst) == checksums(src)


def test_deleting_everything_because_the_source_root_is_missing_is_refused(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, sample(4))
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "delete": {"enabled": True}})
    assert job.run().status == "SUCCEEDED"
    before = checksums(dst)
    os.rename(src, lake.parent / "moved-away")
    with pytest.raises(ConfigError, match=r"the copy source .* does not exist") as refused:  # before anything is listed
        job.run()
    assert refused.value.key == "job.copy.source" and "allow_empty_source" in str(refused.value)
    assert checksums(dst) == before
    (lake.parent / "moved-away" / "d0").rename(lake.parent / "d0")
    src.mkdir()  # there, and empty: the deletions it would make are refused
    refused_run = job.run()
    assert refused_run.status == "FAILED"
    assert "missing or holds no file" in refused_run.dags[0].message
    assert checksums(dst) == before


def test_deleting_more_than_max_fraction_is_refused_and_nothing_is_deleted(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, sample(8))
    job = Copier(spark, lake, {"source": str(src), "target": str(dst)})
    assert job.run().status == "SUCCEEDED"
    before = checksums(dst)
    for path in list((src / "d0").glob("*.bin")) + list((src / "d1").glob("*.bin")):
        path.unlink()
    refused = job.run(delete={"enabled": True, "max_fraction": 0.25})
    assert refused.status == "FAILED"
    assert "max_fraction" in refused.dags[0].message and "would be deleted" in refused.dags[0].message
    assert checksums(dst) == before


def test_a_source_root_that_cannot_be_listed_fails_its_dag_and_not_the_job(spark: Any, lake: Path) -> None:
    good, dst = lake.parent / "good", lake.parent / "dst"
    tree(good, {"a.txt": b"a"})
    not_a_dir = lake.parent / "plain-file"
    not_a_dir.write_bytes(b"x")
    raw = {
        "dags": {
            "broken": {"copy": {"source": str(not_a_dir), "target": str(dst / "broken")}},
            "fine": {"copy": {"source": str(good), "target": str(dst / "fine")}},
        }
    }
    result = JobManager(spark, InMemoryMetadataStore()).run(compile_dict(raw, lake), "run-1", InMemoryRunStore())
    by_name = {d.name: d for d in result.dags}
    assert by_name["fine"].status == "SUCCEEDED" and (dst / "fine" / "a.txt").read_bytes() == b"a"
    assert by_name["broken"].status == "FAILED"
    assert "cannot list" in by_name["broken"].message and "plain-file" in by_name["broken"].message
    assert not (dst / "broken").exists()


def test_glob_datasets_publish_per_file_set_and_a_corrupt_file_fails_only_its_set(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    good = {f"db/{t}/part-{i}.csv.gz": gzip.compress(f"{t},{i}\n".encode() * 500) for t in ("a", "b") for i in range(3)}
    tree(src, good)
    tree(src, {"db/c/part-0.csv.gz": gzip.compress(b"fine\n" * 100), "db/c/part-1.csv.gz": b"\x1f\x8b\x08 not gzip"})
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "datasets": {"type": "glob", "pattern": "db/*"},
            "transforms": [{"type": "gunzip"}],
        },
    )
    first = job.run()
    assert first.status == "PARTIAL", json.dumps(first.summary()["dags"], default=str)[:3000]
    by_name = {o.unit.dataset: o for o in first.dags[0].datasets}
    assert by_name["db/a"].status == Status.COMMITTED and by_name["db/b"].status == Status.COMMITTED
    assert by_name["db/c"].status == Status.FAILED
    assert "part-1.csv.gz" in by_name["db/c"].message
    assert gzip.decompress(good["db/a/part-2.csv.gz"]) == (dst / "db" / "a" / "part-2.csv").read_bytes()
    assert not (dst / "db" / "c").exists(), "nothing of the failed set is visible"
    (left,) = staged(dst)  # the good file of the failed set stays staged, recorded in its task's journal
    assert left.split("/")[-1] in journaled(dst)
    assert (dst / "_engine_staging").is_dir(), "kept while a staged file waits for the next run"

    (src / "db" / "c" / "part-1.csv.gz").write_bytes(gzip.compress(b"fixed\n"))
    second = job.run()
    assert second.status == "SUCCEEDED", second.summary()
    stats = copy_of(second)
    assert (stats["files_copied"], stats["files_reused"]) == (1, 1), "the staged file is reused, not copied again"
    assert (dst / "db" / "c" / "part-1.csv").read_bytes() == b"fixed\n"
    assert (dst / "db" / "c" / "part-0.csv").read_bytes() == b"fine\n" * 100
    assert staged(dst) == []
    assert not (dst / "_engine_staging").exists(), "nothing waits any more: the staging directory goes too"


def test_date_partitioned_streams_publish_each_partition_with_an_event(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = {
        f"{stream}/2026/11/{day:02d}/{n}.json": f'{{"s":"{stream}","d":{day},"n":{n}}}\n'.encode()
        for stream in ("clicks", "views")
        for day in (1, 2, 3)
        for n in range(2)
    }
    files["clicks/2025/12/31/old.json"] = b"{}\n"
    files["clicks/README"] = b"not in a partition"
    tree(src, files)
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "datasets": {"type": "date_partitioned", "pattern": "*", "layout": "yyyy/MM/dd", "since": "2026-01-01"},
        },
    )
    result = job.run()
    assert result.status == "SUCCEEDED", result.summary()
    expected = {k: v for k, v in checksums(src).items() if "/2026/" in k}
    assert checksums(dst) == expected
    lines = [
        json.loads(x)
        for f in (lake / "_engine" / "copy_events" / "mirror").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert sorted((e["dataset"], e["file_set"], e["files"]) for e in lines) == [
        (s, f"2026/11/{d:02d}", 2) for s in ("clicks", "views") for d in (1, 2, 3)
    ]


@pytest.mark.parametrize("transforms", [[], [{"type": "gzip"}]], ids=["plain", "gzip"])
def test_a_file_changed_after_listing_fails_its_set_and_the_rerun_copies_it(
    spark: Any, lake: Path, transforms: list[dict[str, Any]]
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"a/1.bin": os.urandom(5000), "b/2.bin": os.urandom(5000)})
    copy = {"source": str(src), "target": str(dst), "file_set": "directory", "transforms": transforms}
    job = Copier(spark, lake, {**copy, "verify": {"checksum": "md5"}})
    planned = job.plan()
    with open(src / "a" / "1.bin", "ab") as grown:  # a writer appends after the listing
        grown.write(b"more")
    result = job.execute(planned)
    assert result.status == "PARTIAL"
    assert "changed while being copied" in result.dags[0].message and "1.bin" in result.dags[0].message
    ext = ".gz" if transforms else ""
    assert not (dst / "a").exists() and (dst / "b" / f"2.bin{ext}").exists()
    assert job.run().status == "SUCCEEDED"
    for rel in ("a/1.bin", "b/2.bin"):
        data = (dst / f"{rel}{ext}").read_bytes()
        assert (gzip.decompress(data) if transforms else data) == (src / rel).read_bytes()


def test_an_archive_renamed_at_the_source_keeps_its_members_when_deletions_propagate(spark: Any, lake: Path) -> None:
    import io
    import tarfile

    src, dst = lake.parent / "src", lake.parent / "dst"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"m/one.txt": b"1" * 100, "two.txt": b"2" * 200}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tree(src, {"snap-1.tar": buf.getvalue()})
    copy = {"source": str(src), "target": str(dst), "transforms": [{"type": "untar", "into": "parent"}]}
    job = Copier(spark, lake, {**copy, "delete": {"enabled": True}})
    assert job.run().status == "SUCCEEDED"
    os.rename(src / "snap-1.tar", src / "snap-2.tar")  # the same members under a new archive name
    assert job.run().status == "SUCCEEDED"
    assert (dst / "m" / "one.txt").read_bytes() == b"1" * 100 and (dst / "two.txt").read_bytes() == b"2" * 200


def test_attributes_of_new_files_and_directories_and_preserved_mtimes(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"x/y/z.txt": b"z", "top.txt": b"t"})
    os.utime(src / "x" / "y" / "z.txt", (1_600_000_000, 1_600_000_000))
    owner = os.getuid() if os.getuid() != 0 else 4242
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "preserve": {"mtime": True},
            "attributes": {
                "permissions": "0640",
                "directory_permissions": "0750",
                "owner": str(owner),
                "group": str(os.getgid() if os.getuid() != 0 else 4343),
            },
        },
    )
    assert job.run().status == "SUCCEEDED"
    z = (dst / "x" / "y" / "z.txt").stat()
    assert stat.S_IMODE(z.st_mode) == 0o640 and z.st_uid == owner
    assert int(z.st_mtime) == 1_600_000_000
    assert stat.S_IMODE((dst / "x").stat().st_mode) == 0o750
    assert stat.S_IMODE((dst / "x" / "y").stat().st_mode) == 0o750


def test_large_files_split_into_blocks_are_reassembled_exactly(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"big.bin": os.urandom(5 * 1024 * 1024 + 123), "small.bin": b"s" * 10})
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "split": {"enabled": True, "block_size": "1m", "min_size": "2m"},
            "verify": {"checksum": "sha1"},
        },
    )
    result = job.run()
    assert result.status == "SUCCEEDED", result.summary()
    assert checksums(dst) == checksums(src)
    assert copy_of(result)["files_copied"] == 2


def test_files_already_at_the_target_are_adopted_without_copying(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    files = tree(src, sample(6))
    tree(dst, files)  # an earlier `cp -r`: same sizes, written after the sources
    job = Copier(spark, lake, {"source": str(src), "target": str(dst)})
    first = job.run()
    stats = copy_of(first)
    assert (stats["files_copied"], stats["files_skipped"]) == (0, 8)
    (src / "d1" / "f1.bin").write_bytes(b"changed")
    second = job.run()
    assert copy_of(second)["files_copied"] == 1
    assert checksums(dst) == checksums(src)


def test_deletions_keep_excluded_target_files_unless_asked(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"a.bin": b"a", "b.bin": b"b", "notes.tmp": b"source's own, excluded"})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "exclude": ["*.tmp"]})
    assert job.run().status == "SUCCEEDED"
    (dst / "local.tmp").write_bytes(b"the target's own scratch file")
    (src / "a.bin").unlink()
    kept = job.run(delete={"enabled": True})
    assert copy_of(kept)["files_deleted"] == 1
    assert sorted(checksums(dst)) == ["b.bin", "local.tmp"], "excluded files stay, as rsync keeps them"

    deleted = job.run(delete={"enabled": True, "excluded": True})
    assert copy_of(deleted)["files_deleted"] == 1
    assert sorted(checksums(dst)) == ["b.bin"]


def test_a_directory_that_became_a_file_at_the_source_replaces_it_when_deletions_propagate(
    spark: Any, lake: Path
) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"d/x/one.bin": b"1", "d/x/two.bin": b"2", "keep.bin": b"k"})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "delete": {"enabled": True}})
    assert job.run().status == "SUCCEEDED"
    for name in ("one.bin", "two.bin"):
        (src / "d" / "x" / name).unlink()
    (src / "d" / "x").rmdir()
    (src / "d" / "x").write_bytes(b"now a file")
    second = job.run()
    assert second.status == "SUCCEEDED", second.summary()
    assert (copy_of(second)["files_copied"], copy_of(second)["files_deleted"]) == (1, 2)
    assert checksums(dst) == checksums(src)
    assert (dst / "d" / "x").read_bytes() == b"now a file"


def test_two_source_files_with_one_destination_are_refused_naming_both(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"t/x.csv": b"plain\n", "t/x.csv.gz": gzip.compress(b"zipped\n"), "u/y.csv.gz": gzip.compress(b"y\n")})
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "datasets": {"type": "glob", "pattern": "*"},
            "transforms": [{"type": "gunzip"}],
        },
    )
    result = job.run()
    assert result.status == "PARTIAL", result.summary()
    by_name = {o.unit.dataset: o for o in result.dags[0].datasets}
    assert by_name["t"].status == Status.FAILED
    assert "x.csv and x.csv.gz would both be copied to x.csv" in by_name["t"].message, by_name["t"].message
    assert checksums(dst) == {"u/y.csv": hashlib.sha256(b"y\n").hexdigest()}, "the other dataset publishes"


def test_archive_members_landing_on_one_path_fail_the_later_archive_every_run(spark: Any, lake: Path) -> None:
    import io
    import tarfile

    def archive(members: dict[str, bytes]) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return out.getvalue()

    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(
        src, {"a.tar": archive({"same.txt": b"from a", "a-only.txt": b"a"}), "b.tar": archive({"same.txt": b"from b"})}
    )
    job = Copier(
        spark,
        lake,
        {
            "source": str(src),
            "target": str(dst),
            "file_set": "file",
            "transforms": [{"type": "untar", "into": "parent"}],
        },
    )
    for attempt in range(2):  # the same outcome each run: no flip-flop between the two archives
        result = job.run()
        assert result.status == ("PARTIAL" if attempt == 0 else "FAILED"), result.summary()  # then only b.tar is left
        message = result.dags[0].message
        assert "b.tar and a.tar would both be copied to same.txt" in message, message
        assert (dst / "same.txt").read_bytes() == b"from a" and (dst / "a-only.txt").read_bytes() == b"a"
        stats = copy_of(result)
        assert (stats["files_failed"], stats["files_skipped"]) == (1, attempt), stats  # a.tar: copied, then kept


def test_a_changed_recipe_copies_published_files_again(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"a.bin": b"a" * 100, "s/b.bin": b"b" * 100})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "attributes": {"permissions": "0644"}})
    assert job.run().status == "SUCCEEDED"
    assert stat.S_IMODE((dst / "a.bin").stat().st_mode) == 0o644
    assert copy_of(job.run())["files_copied"] == 0
    again = job.run(attributes={"permissions": "0600"})
    assert copy_of(again)["files_copied"] == 2, "files made under the old config are made again"
    assert {stat.S_IMODE(p.stat().st_mode) for p in dst.rglob("*.bin")} == {0o600}
    assert copy_of(job.run(attributes={"permissions": "0600"}))["files_copied"] == 0


def test_glob_datasets_of_single_files_publish_each_file_alone(spark: Any, lake: Path) -> None:
    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(
        src,
        {
            "db/a.csv.gz": gzip.compress(b"a\n"),
            "db/b.csv.gz": gzip.compress(b"b\n"),
            "db/sub/c.csv.gz": gzip.compress(b"c\n"),
            "other/d.csv.gz": gzip.compress(b"d\n"),
        },
    )
    copy = {"source": str(src), "target": str(dst), "transforms": [{"type": "gunzip"}], "delete": {"enabled": True}}
    job = Copier(spark, lake, {**copy, "datasets": {"type": "glob", "pattern": "db/*", "match": "files"}})
    first = job.run()
    assert first.status == "SUCCEEDED", first.summary()
    assert sorted(o.unit.dataset for o in first.dags[0].datasets) == ["db/a.csv.gz", "db/b.csv.gz"]
    assert {k: (dst / k).read_bytes() for k in checksums(dst)} == {"db/a.csv": b"a\n", "db/b.csv": b"b\n"}
    assert copy_of(job.run())["files_copied"] == 0

    (src / "db" / "b.csv.gz").write_bytes(gzip.compress(b"b, changed\n"))
    second = job.run()
    assert (copy_of(second)["files_copied"], copy_of(second)["files_deleted"]) == (1, 0), "a sibling is no file of b's"
    assert (dst / "db" / "b.csv").read_bytes() == b"b, changed\n" and (dst / "db" / "a.csv").read_bytes() == b"a\n"

    both = job.run(datasets={"type": "glob", "pattern": "db/*", "match": "any"})
    assert sorted(o.unit.dataset for o in both.dags[0].datasets) == ["db/a.csv.gz", "db/b.csv.gz", "db/sub"]
    assert (dst / "db" / "sub" / "c.csv").read_bytes() == b"c\n"
    assert copy_of(both)["files_deleted"] == 0


def test_a_file_that_became_a_directory_is_replaced_and_the_deletion_replays_cleanly(spark: Any, lake: Path) -> None:
    from engine.commit.steps import StepContext
    from engine.copy.steps import DeleteTargetFiles
    from engine.storage.hadoop import HadoopFs

    src, dst = lake.parent / "src", lake.parent / "dst"
    tree(src, {"d/b": b"a file", "keep.bin": b"k"})
    job = Copier(spark, lake, {"source": str(src), "target": str(dst), "delete": {"enabled": True}})
    assert job.run().status == "SUCCEEDED"
    (src / "d" / "b").unlink()
    tree(src, {"d/b/c.txt": b"now inside a directory"})
    second = job.run()
    assert second.status == "SUCCEEDED", second.dags[0].message
    assert checksums(dst) == checksums(src)
    # Recovery replays the deletion after the publish made `d/b` a directory: it is done, not an error.
    step = DeleteTargetFiles(str(dst), "mirror", [str(dst / "d" / "b")], root=str(dst))
    ctx = StepContext(spark, InMemoryMetadataStore(), HadoopFs(spark), fresh=False)
    assert step.verify(ctx)
    step.execute(ctx)
    assert (dst / "d" / "b" / "c.txt").read_bytes() == b"now inside a directory"
