"""Copy jobs through the command line: a replica checked file by file (sha256), a driver killed
mid-copy and mid-publish and the next run repairing it, the demo job and its idle rerun, and config
mistakes refused before anything is written.

Every run goes through the CLI entry in this process (``run_cli``/``run_here``: the command line
``./spark-submit.sh`` passes to ``main.py``, on the session's Spark), except the two kills: a
SIGKILL of the driver needs a driver of its own (``tests/commit/harness.driver``: ``python
main.py``, local[2], as the crash matrix kills it)."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.commit.harness import driver, run_here
from tests.e2e import REPO
from tests.helpers import run_cli

STAGING = "_engine_staging"
KILLED = -9  # the driver (python main.py) killed itself with SIGKILL
DIRECTORIES = ("alpha", "beta", "gamma")
SMALL_PER_DIRECTORY = 130
BIG = 3 << 20


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """392 files: 130 small ones (200 B - 6 KB) in each of three directories, and two of 3 MiB."""
    root = tmp_path_factory.mktemp("copy") / "src"
    rng = random.Random(20261124)
    for name in DIRECTORIES:
        directory = root / name
        directory.mkdir(parents=True)
        for i in range(SMALL_PER_DIRECTORY):
            (directory / f"part-{i:04d}.bin").write_bytes(rng.randbytes(rng.randint(200, 6000)))
    (root / "alpha" / "big-1.bin").write_bytes(rng.randbytes(BIG))
    (root / "gamma" / "big-2.bin").write_bytes(rng.randbytes(BIG + 12345))
    return root


def copy_job(tmp_path: Path, src: Path, dst: Path, *, max_files: int = 20, keys: dict[str, str] | None = None) -> Path:
    """A jobs directory holding ``replica.conf``: ``src`` copied to ``dst`` by directory, in tasks
    of at most ``max_files`` files; ``keys`` adds (or, coming last, overrides) keys of ``copy``."""
    jobs = tmp_path / "jobs"
    jobs.mkdir(exist_ok=True)
    extra = "".join(f"  {key} = {value}\n" for key, value in (keys or {}).items())
    (jobs / "replica.conf").write_text(
        "name = replica\n"
        "copy {\n"
        f'  source = "{src}"\n'
        f'  target = "{dst}"\n'
        "  file_set = directory\n"
        "  verify.checksum = sha256\n"
        f"  tasks.max_files = {max_files}\n"
        f"{extra}"
        "}\n"
    )
    return jobs


def killed_at(point: str, jobs: Path, wh: Path) -> subprocess.CompletedProcess[str]:
    """The copy job in a driver process of its own that kills itself (SIGKILL) at ``point``."""
    return driver(jobs, wh, kill_at=point, job="replica").communicate_result(timeout=600)


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def copy_stats(summary: dict[str, Any]) -> dict[str, Any]:
    stats = summary["dags"][0]["copy"]
    assert isinstance(stats, dict)
    return stats


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` by relative path, staging excluded."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and STAGING not in path.relative_to(root).parts
    }


def staged_files(root: Path) -> list[str]:
    staging = root / STAGING
    return sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())


def test_a_copy_job_replicates_every_file_verified_by_sha256(spark: Any, source: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    code, summary, said = run_cli(copy_job(tmp_path, source, dst), "job=replica", f"warehouse={tmp_path / 'wh'}")
    assert code == 0, said[-3000:]
    assert summary["status"] == "SUCCEEDED"
    stats = copy_stats(summary)
    expected = checksums(source)
    assert (stats["files_copied"], stats["files_failed"], stats["file_sets_published"]) == (len(expected), 0, 3)
    assert stats["bytes"] == sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    assert checksums(dst) == expected
    assert staged_files(dst) == []
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in source.iterdir()), "no _engine_staging"


@pytest.mark.crash
def test_a_driver_killed_mid_copy_publishes_nothing_and_the_rerun_reuses_what_was_staged(
    spark: Any, source: Path, tmp_path: Path
) -> None:
    """The kill needs a process: a SIGKILL of the driver in the middle of the copy (a driver of its
    own, killed at ``mid_copy``). The rerun runs in this process."""
    dst, wh = tmp_path / "dst", tmp_path / "wh"
    # mid_copy fires when the driver's progress poll (every 0.5 s) sees half the files done; a copy
    # over before the next poll never fires it. 49 tasks of 8 files keep the copy going well past
    # the halfway poll (~7 s of copying on a loaded 2-core box; not measured on an idle one)
    jobs = copy_job(tmp_path, source, dst, max_files=8)
    killed = killed_at("mid_copy", jobs, wh)
    assert killed.returncode == KILLED, output(killed)[-3000:]
    assert "killed at mid_copy" in output(killed)
    expected = checksums(source)
    # publishing starts only once every file is staged: the target holds no file of any set (so no
    # partial one); what was copied waits in staging, each verified file in its task's journal
    assert checksums(dst) == {}
    keys = {json.loads(line)["key"] for p in (dst / STAGING).rglob("*.jsonl") for line in p.read_text().splitlines()}
    marked = [f for f in staged_files(dst) if f.split("/")[-1] in keys]
    assert 0 < len(marked) < len(expected), f"the kill landed halfway: {len(marked)} of {len(expected)} staged"

    code, rerun = run_here(jobs, wh, job="replica")
    assert code == 0, rerun
    assert rerun["status"] == "SUCCEEDED"
    stats = copy_stats(rerun)
    # every file staged and verified before the kill is published without copying it again; a
    # file whose task was cut off (not journaled yet) is copied from scratch
    assert (stats["files_reused"], stats["files_copied"]) == (len(marked), len(expected) - len(marked))
    assert checksums(dst) == expected
    assert staged_files(dst) == []
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in source.iterdir()), "no _engine_staging"


@pytest.mark.crash
def test_a_driver_killed_mid_publish_is_completed_by_the_rerun_s_recovery(
    spark: Any, source: Path, tmp_path: Path
) -> None:
    """The kill needs a process: a SIGKILL of the driver halfway through publishing the first file
    set (a driver of its own, killed at ``mid_step:1``). The rerun runs in this process."""
    dst, wh = tmp_path / "dst", tmp_path / "wh"
    jobs = copy_job(tmp_path, source, dst)
    killed = killed_at("mid_step:1", jobs, wh)
    assert killed.returncode == KILLED, output(killed)[-3000:]
    assert "killed at mid_step:1" in output(killed)
    expected = checksums(source)
    published = checksums(dst)
    # halfway through the first set (`alpha`): a reader sees part of it, each file complete
    assert published and all(rel.startswith("alpha/") for rel in published)
    assert len(published) < SMALL_PER_DIRECTORY + 1
    assert all(expected[rel] == digest for rel, digest in published.items())

    code, rerun = run_here(jobs, wh, job="replica")
    assert code == 0, rerun
    assert rerun["status"] == "SUCCEEDED"
    assert rerun["dags"][0]["recovered_batches"], "the rerun replays the killed run's commit sequence"
    assert copy_stats(rerun)["files_copied"] == 0, "the recovered sequence published everything: nothing to copy"
    assert checksums(dst) == expected
    assert staged_files(dst) == []


def test_the_demo_mirror_job_runs_and_an_unchanged_rerun_copies_nothing(spark: Any, tmp_path: Path) -> None:
    src, dst, wh = REPO / "jobs" / "demo" / "data" / "landing-files", tmp_path / "mirror", tmp_path / "wh"
    expected = {rel: digest for rel, digest in checksums(src).items() if not rel.endswith("_SUCCESS")}
    args = ("job=demo/mirror", f"job.copy.target={dst}", f"warehouse={wh}")
    code, first, said = run_cli(REPO / "jobs", *args)
    assert code == 0, said[-3000:]
    assert first["status"] == "SUCCEEDED"
    assert copy_stats(first)["files_copied"] == len(expected)
    assert checksums(dst) == expected

    code, again, said = run_cli(REPO / "jobs", *args)
    assert code == 0, said[-3000:]
    stats = copy_stats(again)
    assert (stats["files_copied"], stats["files_skipped"]) == (0, len(expected))


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        pytest.param(
            {"datasets": '{ type = globb, pattern = "*" }'},
            "unknown type `globb` (did you mean `glob`? known: recursive, glob, date_partitioned) "
            "(key `job.copy.datasets.type`",
            id="unknown-finder-type",
        ),
        pytest.param(
            {"file_set": "partition"},
            "need `datasets.type = date_partitioned` (key `job.copy.file_set`",
            id="partition-without-date-partitions",
        ),
    ],
)
def test_a_copy_config_mistake_exits_2_naming_the_key_and_writes_nothing(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], keys: dict[str, str], needle: str
) -> None:
    src, dst, wh = tmp_path / "src", tmp_path / "dst", tmp_path / "wh"
    (src / "x").mkdir(parents=True)
    (src / "x" / "a.txt").write_text("a\n")
    capfd.readouterr()  # (what came before the run)
    code, summary, said = run_cli(copy_job(tmp_path, src, dst, keys=keys), "job=replica", f"warehouse={wh}")
    fd = capfd.readouterr()  # what reached the file descriptors besides (the JVM's own writes)
    printed = said + fd.out + fd.err
    assert code == 2, printed[-3000:]
    assert summary["status"] == "CONFIG_ERROR"
    assert needle in summary["message"] and "replica.conf" in summary["message"]
    assert printed.count("config error:") == 1 and "Traceback" not in printed
    assert not dst.exists()
    assert not wh.exists() or list(wh.iterdir()) == []
