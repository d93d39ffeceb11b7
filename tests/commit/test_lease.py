"""The run lease: one run of a job at a time, a dead holder does not block, nothing left behind;
on a local disk and on an S3-compatible server (tests/s3.py: a conditional put instead of ``O_EXCL``)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from engine.commit.lease import Lease, Leases, single_writer, writer_dir, writer_lease
from engine.errors import EXIT_BUSY, JobBusyError
from engine.platform.procs import pid_start


@pytest.fixture(params=["disk", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The metadata location the leases live under: a local directory, or a prefix in a new bucket."""
    if request.param == "disk":
        return str(tmp_path / "_engine")
    request.getfixturevalue("s3_env")
    return f"s3a://{request.getfixturevalue('bucket')}/wh/_engine"


def _put(lease: Lease, generation: int, record: dict[str, object]) -> None:
    lease.files.write(f"{generation}.json", json.dumps(record).encode())


def _get(lease: Lease, generation: int) -> dict[str, object]:
    found = lease.files.read(f"{generation}.json")
    assert found is not None
    return dict(json.loads(found))


def test_a_second_run_is_refused_naming_the_holder(root: str) -> None:
    first = Lease(root, "orders", run_id="run-A", ttl_seconds=60).acquire()
    with pytest.raises(JobBusyError, match=r"run run-A on host .* holds its lease") as info:
        Lease(root, "orders", run_id="run-B", ttl_seconds=60).acquire()
    assert info.value.exit_code == EXIT_BUSY == 3
    Lease(root, "customers", run_id="run-C", ttl_seconds=60).acquire().release()  # other job
    first.release()
    again = Lease(root, "orders", run_id="run-B", ttl_seconds=60).acquire()
    again.release()


def test_release_leaves_nothing_behind(root: str) -> None:
    lease = Lease(root, "orders", run_id="r", ttl_seconds=60).acquire()
    assert lease.files.names() == ["1.json"]
    lease.release()
    assert lease.files.names() == []
    if not root.startswith("s3a://"):
        assert not Path(root).exists()


def test_a_dead_holder_on_this_host_does_not_block(root: str) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lease = Lease(root, "orders", run_id="ghost", ttl_seconds=600)
    _put(lease, 7, {**lease._record(), "pid": dead.pid, "pid_start": "1"})
    taken = Lease(root, "orders", run_id="next", ttl_seconds=600).acquire()
    assert taken.generation == 8
    assert lease.files.names() == ["8.json"]
    taken.release()


def test_a_holder_that_died_but_is_not_yet_reaped_does_not_block(tmp_path: Path) -> None:
    """A driver killed with its JVM (SIGKILL) stays a zombie until whoever adopted it reaps it,
    which some init processes do late or never: its pid still answers ``kill(pid, 0)``, and a rerun
    was refused (exit 3) by a lease nobody renews. A zombie holds nothing."""
    ended = subprocess.Popen(["true"])  # not waited for: a zombie until the end of the test
    try:
        deadline = time.monotonic() + 10
        while pid_start(ended.pid) is not None and _state(ended.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(ended.pid) == "Z"
        lease = Lease(str(tmp_path / "_engine"), "orders", run_id="gone", ttl_seconds=600)
        _put(lease, 1, {**lease._record(), "pid": ended.pid, "pid_start": pid_start(ended.pid)})
        assert lease.holder() is None
        Lease(str(tmp_path / "_engine"), "orders", run_id="rerun", ttl_seconds=600).acquire().release()
    finally:
        ended.wait()


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_an_expired_lease_of_another_host_is_taken_over(root: str) -> None:
    lease = Lease(root, "orders", run_id="far", ttl_seconds=600)
    far = {"run_id": "far", "host": "elsewhere", "pid": 1, "expires": time.time() + 60}
    _put(lease, 1, far)
    with pytest.raises(JobBusyError, match="host elsewhere"):
        Lease(root, "orders", run_id="me", ttl_seconds=600).acquire()
    _put(lease, 1, {**far, "expires": time.time() - 1})
    Lease(root, "orders", run_id="me", ttl_seconds=600).acquire().release()


def test_of_many_racing_runs_exactly_one_wins(root: str) -> None:
    won: list[Lease] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        lease = Lease(root, "orders", run_id=f"run-{i}", ttl_seconds=60)
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


def test_runs_taking_and_giving_back_the_lease_in_a_loop_never_hold_it_together(tmp_path: Path) -> None:
    """A run that listed the generations while another held the lease, and created the next one
    just after it was released, must not stand beside a run that listed after the release and
    created the first generation again: of two such claims, neither or one holds."""
    inside, most, held = [0], [0], [0]
    lock = threading.Lock()
    start = threading.Barrier(6)

    def run(i: int) -> None:
        start.wait()
        mine, deadline = 0, time.monotonic() + 20
        while mine < 5 and time.monotonic() < deadline:
            lease = Lease(str(tmp_path / "_engine"), "orders", run_id=f"run-{i}-{time.time_ns()}", ttl_seconds=60)
            try:
                lease.acquire()
            except JobBusyError:
                time.sleep(0.001)
                continue
            mine += 1
            with lock:
                inside[0] += 1
                most[0], held[0] = max(most[0], inside[0]), held[0] + 1
            time.sleep(0.0005)
            with lock:
                inside[0] -= 1
            lease.release()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and held[0] == 30


def test_a_holder_that_lost_its_lease_may_not_publish(root: str) -> None:
    stale = Lease(root, "orders", run_id="slow", ttl_seconds=5).acquire()
    stale._stop.set()  # it stalls: no renewals
    assert stale.generation is not None
    _put(stale, stale.generation, {**_get(stale, stale.generation), "expires": time.time() - 1})
    fresh = Lease(root, "orders", run_id="fresh", ttl_seconds=60).acquire()
    with pytest.raises(Exception, match="run slow lost the lease of job orders"):
        stale.check()
    fresh.check()
    fresh.release()


def test_a_late_renewal_of_a_holder_that_stalled_makes_no_second_holder(root: str) -> None:
    """A renewal can land after the holder's expiry and after another run took the lease (a slow
    store): the stale holder's record then looks alive again, but a newer generation stands."""
    stale = Lease(root, "orders", run_id="slow", ttl_seconds=60).acquire()
    stale._stop.set()
    assert stale.generation is not None
    _put(stale, stale.generation, {**_get(stale, stale.generation), "expires": time.time() - 1})
    fresh = Lease(root, "orders", run_id="fresh", ttl_seconds=60).acquire()
    stale._write(stale._record())  # the late renewal lands, recreating its record with a new expiry
    assert not stale.still_held() and fresh.still_held()
    with pytest.raises(Exception, match="run slow lost the lease"):
        stale.check()
    fresh.check()
    fresh.release()
    stale.release()
    assert fresh.files.names() == []


def test_the_holder_renews_its_expiry(root: str) -> None:
    lease = Lease(root, "orders", run_id="r", ttl_seconds=3).acquire()
    assert lease.generation is not None
    first = float(str(_get(lease, lease.generation)["expires"]))
    time.sleep(2.5)
    assert float(str(_get(lease, lease.generation)["expires"])) > first
    lease.release()


def test_leases_are_taken_all_or_none(root: str) -> None:
    held = Lease(root, "other", run_id="run-X", ttl_seconds=60).acquire()
    mine = Leases(
        [Lease(root, "orders", run_id="run-A", ttl_seconds=60), Lease(root, "other", run_id="run-A", ttl_seconds=60)]
    )
    with pytest.raises(JobBusyError, match="job other is already running: run run-X"):
        mine.acquire()
    Lease(root, "orders", run_id="run-B", ttl_seconds=60).acquire().release()  # the first was given back
    held.release()
    with mine:
        mine.check()
        assert [lease.generation is not None for lease in mine.leases] == [True, True]
    assert not any(lease.files.names() for lease in mine.leases)


@pytest.mark.parametrize(
    ("location", "single", "kept"),
    [
        ("s3a://b/lake/orders", True, "s3a://b/lake/_engine_writer/orders"),
        ("s3://b/lake//orders/", True, "s3a://b/lake/_engine_writer/orders"),
        ("S3N://b/orders", True, "s3a://b/_engine_writer/orders"),
        ("gs://b/lake/orders", False, "gs://b/lake/_engine_writer/orders"),
        (
            "abfss://c@acct.dfs.core.windows.net/orders",
            False,
            "abfss://c@acct.dfs.core.windows.net/_engine_writer/orders",
        ),
        ("/lake/orders", False, None),
        ("file:/lake/orders", False, None),
    ],
)
def test_which_tables_take_one_writer_and_where_their_lease_is(location: str, single: bool, kept: str | None) -> None:
    assert single_writer(location) is single
    if kept is not None:
        assert writer_dir(location) == kept


def test_a_writer_lease_names_the_table_and_the_job_holding_it(root: str) -> None:
    table = f"{root.rsplit('/', 1)[0]}/shared/orders"
    first = writer_lease(table, "orders", run_id="run-A", ttl_seconds=60, where=f"{root}/w").acquire()
    with pytest.raises(JobBusyError, match=rf"{table} is being written by job orders: run run-A .* holds its lease"):
        writer_lease(table, "returns", run_id="run-B", ttl_seconds=60, where=f"{root}/w").acquire()
    first.release()
