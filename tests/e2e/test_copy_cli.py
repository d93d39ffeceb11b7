"""Copy jobs through ./spark-submit.sh, as a scheduler runs them: a replica checked file by file
(sha256), a driver killed mid-copy and mid-publish and the next run repairing it, the demo job and
its idle rerun, and config mistakes refused before anything is written."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import REPO, SUBMIT

pytestmark = pytest.mark.e2e
STAGING = "_engine_staging"
KILLED = (-9, 137)  # SIGKILL of the driver: spark-submit exits 137 (or the wrapper dies of it)
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


def submit(*args: str, jobs: Path | None = None, kill: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENGINE_KILL_AT"}
    if jobs is not None:
        env["ENGINE_JOBS_DIR"] = str(jobs)
    if kill is not None:
        env["ENGINE_KILL_AT"] = kill
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def output(proc: subprocess.CompletedProcess[str]) -> str:
    # spark-submit's PythonRunner merges the driver's stderr into stdout: read both
    return proc.stdout + proc.stderr


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(parsed, dict)
    return parsed


def copy_stats(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    stats = summary(proc)["dags"][0]["copy"]
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


def test_a_copy_job_replicates_every_file_verified_by_sha256(source: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    proc = submit("job=replica", f"warehouse={tmp_path / 'wh'}", jobs=copy_job(tmp_path, source, dst))
    assert proc.returncode == 0, output(proc)[-3000:]
    assert summary(proc)["status"] == "SUCCEEDED"
    stats = copy_stats(proc)
    expected = checksums(source)
    assert (stats["files_copied"], stats["files_failed"], stats["file_sets_published"]) == (len(expected), 0, 3)
    assert stats["bytes"] == sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    assert checksums(dst) == expected
    assert staged_files(dst) == []
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in source.iterdir()), "no _engine_staging"


def test_a_driver_killed_mid_copy_publishes_nothing_and_the_rerun_reuses_what_was_staged(
    source: Path, tmp_path: Path
) -> None:
    dst, wh = tmp_path / "dst", tmp_path / "wh"
    # mid_copy fires when the driver's progress poll (every 0.5 s) sees half the files done; a copy
    # over before the next poll never fires it. 49 tasks of 8 files keep the copy going well past
    # the halfway poll (~7 s of copying on a loaded 2-core box; not measured on an idle one)
    jobs = copy_job(tmp_path, source, dst, max_files=8)
    killed = submit("job=replica", f"warehouse={wh}", jobs=jobs, kill="mid_copy")
    assert killed.returncode in KILLED, output(killed)[-3000:]
    assert "killed at mid_copy" in output(killed)
    expected = checksums(source)
    # publishing starts only once every file is staged: the target holds no file of any set (so no
    # partial one); what was copied waits in staging, each verified file in its task's journal
    assert checksums(dst) == {}
    keys = {json.loads(line)["key"] for p in (dst / STAGING).rglob("*.jsonl") for line in p.read_text().splitlines()}
    marked = [f for f in staged_files(dst) if f.split("/")[-1] in keys]
    assert 0 < len(marked) < len(expected), f"the kill landed halfway: {len(marked)} of {len(expected)} staged"

    rerun = submit("job=replica", f"warehouse={wh}", jobs=jobs)
    assert rerun.returncode == 0, output(rerun)[-3000:]
    assert summary(rerun)["status"] == "SUCCEEDED"
    stats = copy_stats(rerun)
    # every file staged and verified before the kill is published without copying it again; a
    # file whose task was cut off (not journaled yet) is copied from scratch
    assert (stats["files_reused"], stats["files_copied"]) == (len(marked), len(expected) - len(marked))
    assert checksums(dst) == expected
    assert staged_files(dst) == []
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in source.iterdir()), "no _engine_staging"


def test_a_driver_killed_mid_publish_is_completed_by_the_rerun_s_recovery(source: Path, tmp_path: Path) -> None:
    dst, wh = tmp_path / "dst", tmp_path / "wh"
    jobs = copy_job(tmp_path, source, dst)
    killed = submit("job=replica", f"warehouse={wh}", jobs=jobs, kill="mid_step:1")
    assert killed.returncode in KILLED, output(killed)[-3000:]
    assert "killed at mid_step:1" in output(killed)
    expected = checksums(source)
    published = checksums(dst)
    # halfway through the first set (`alpha`): a reader sees part of it, each file complete
    assert published and all(rel.startswith("alpha/") for rel in published)
    assert len(published) < SMALL_PER_DIRECTORY + 1
    assert all(expected[rel] == digest for rel, digest in published.items())

    rerun = submit("job=replica", f"warehouse={wh}", jobs=jobs)
    assert rerun.returncode == 0, output(rerun)[-3000:]
    s = summary(rerun)
    assert s["status"] == "SUCCEEDED"
    assert s["dags"][0]["recovered_batches"], "the rerun replays the killed run's commit sequence"
    assert copy_stats(rerun)["files_copied"] == 0, "the recovered sequence published everything: nothing to copy"
    assert checksums(dst) == expected
    assert staged_files(dst) == []


def test_the_demo_mirror_job_runs_and_an_unchanged_rerun_copies_nothing(tmp_path: Path) -> None:
    src, dst, wh = REPO / "jobs" / "demo" / "data" / "landing-files", tmp_path / "mirror", tmp_path / "wh"
    expected = {rel: digest for rel, digest in checksums(src).items() if not rel.endswith("_SUCCESS")}
    args = ("job=demo/mirror", f"job.copy.target={dst}", f"warehouse={wh}")
    first = submit(*args)
    assert first.returncode == 0, output(first)[-3000:]
    assert summary(first)["status"] == "SUCCEEDED"
    assert copy_stats(first)["files_copied"] == len(expected)
    assert checksums(dst) == expected

    again = submit(*args)
    assert again.returncode == 0, output(again)[-3000:]
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
    tmp_path: Path, keys: dict[str, str], needle: str
) -> None:
    src, dst, wh = tmp_path / "src", tmp_path / "dst", tmp_path / "wh"
    (src / "x").mkdir(parents=True)
    (src / "x" / "a.txt").write_text("a\n")
    proc = submit("job=replica", f"warehouse={wh}", jobs=copy_job(tmp_path, src, dst, keys=keys))
    assert proc.returncode == 2, output(proc)[-3000:]
    s = summary(proc)
    assert s["status"] == "CONFIG_ERROR"
    assert needle in s["message"] and "replica.conf" in s["message"]
    assert output(proc).count("config error:") == 1 and "Traceback" not in output(proc)
    assert not dst.exists()
    assert not wh.exists() or list(wh.iterdir()) == []
