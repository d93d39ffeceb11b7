"""The run lease: one run of a job at a time, a dead holder does not block, nothing left behind."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from engine.commit.lease import Lease
from engine.errors import EXIT_BUSY, JobBusyError


def test_a_second_run_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first = Lease(str(tmp_path / "_engine"), "orders", run_id="run-A", ttl_seconds=60).acquire()
    with pytest.raises(JobBusyError, match=r"run run-A on host .* holds its lease") as info:
        Lease(str(tmp_path / "_engine"), "orders", run_id="run-B", ttl_seconds=60).acquire()
    assert info.value.exit_code == EXIT_BUSY == 3
    Lease(str(tmp_path / "_engine"), "customers", run_id="run-C", ttl_seconds=60).acquire().release()  # other job
    first.release()
    again = Lease(str(tmp_path / "_engine"), "orders", run_id="run-B", ttl_seconds=60).acquire()
    again.release()


def test_release_leaves_nothing_behind(tmp_path: Path) -> None:
    Lease(str(tmp_path / "_engine"), "orders", run_id="r", ttl_seconds=60).acquire().release()
    assert not (tmp_path / "_engine").exists()


def test_a_dead_holder_on_this_host_does_not_block(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lease = Lease(str(tmp_path / "_engine"), "orders", run_id="ghost", ttl_seconds=600)
    lease.dir.mkdir(parents=True)
    record = {**lease._record(), "pid": dead.pid, "pid_start": "1"}
    (lease.dir / "7.json").write_text(json.dumps(record))
    taken = Lease(str(tmp_path / "_engine"), "orders", run_id="next", ttl_seconds=600).acquire()
    assert taken.generation == 8
    assert sorted(p.name for p in lease.dir.iterdir()) == ["8.json"]
    taken.release()


def test_an_expired_lease_of_another_host_is_taken_over(tmp_path: Path) -> None:
    lease = Lease(str(tmp_path / "_engine"), "orders", run_id="far", ttl_seconds=600)
    lease.dir.mkdir(parents=True)
    far = {"run_id": "far", "host": "elsewhere", "pid": 1, "expires": time.time() + 60}
    (lease.dir / "1.json").write_text(json.dumps(far))
    with pytest.raises(JobBusyError, match="host elsewhere"):
        Lease(str(tmp_path / "_engine"), "orders", run_id="me", ttl_seconds=600).acquire()
    (lease.dir / "1.json").write_text(json.dumps({**far, "expires": time.time() - 1}))
    Lease(str(tmp_path / "_engine"), "orders", run_id="me", ttl_seconds=600).acquire().release()


def test_of_many_racing_runs_exactly_one_wins(tmp_path: Path) -> None:
    won: list[Lease] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        lease = Lease(str(tmp_path / "_engine"), "orders", run_id=f"run-{i}", ttl_seconds=60)
        start.wait()
        try:
            won.append(lease.acquire())
        except JobBusyError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(won), len(refused)) == (1, 7)
    won[0].release()


def test_a_holder_that_lost_its_lease_may_not_publish(tmp_path: Path) -> None:
    stale = Lease(str(tmp_path / "_engine"), "orders", run_id="slow", ttl_seconds=5).acquire()
    stale._stop.set()  # it stalls: no renewals
    path = stale.dir / f"{stale.generation}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "expires": time.time() - 1}))
    fresh = Lease(str(tmp_path / "_engine"), "orders", run_id="fresh", ttl_seconds=60).acquire()
    with pytest.raises(Exception, match="run slow lost the lease of job orders"):
        stale.check()
    fresh.check()
    fresh.release()


def test_the_holder_renews_its_expiry(tmp_path: Path) -> None:
    lease = Lease(str(tmp_path / "_engine"), "orders", run_id="r", ttl_seconds=3).acquire()
    path = lease.dir / f"{lease.generation}.json"
    first = json.loads(path.read_text())["expires"]
    time.sleep(2.5)
    assert json.loads(path.read_text())["expires"] > first
    lease.release()
