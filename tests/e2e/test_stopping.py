"""Runs through ``./spark-submit.sh`` killed or stopped at moments a user cannot choose: the JVM
killed with SIGKILL mid-run (its Python driver must end with it, so that the rerun recovers), and
SIGTERM before the JVM, before the driver and during planning (the run stops and publishes
nothing). The process tree is read from ``/proc``, the tables with delta-rs.

Only the stopped or killed run needs a process of its own: signals, ``kill -9`` and the wrapper's
exit code are a real process's. The rerun after it is the same command line run in this process
on the test session's Spark (:func:`tests.helpers.run_cli`): what it proves is in the warehouse the
stopped run left (its lease, its planned batch), not in how the rerun is started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT
from tests.helpers import run_cli
from tests.watchdog import Watchdog, children, stat_fields, watching

pytestmark = pytest.mark.e2e

RUN_SECONDS = 600
JOB = "stopped"
PYTHON = REPO / ".venv" / "bin" / "python"
"""The driver's interpreter (``spark-submit.sh`` sets ``PYSPARK_DRIVER_PYTHON`` to it)."""


@dataclass
class Job:
    """A job of ``rows`` JSON records (every 7th rejected) into a Delta table, in its own jobs folder
    and warehouse under ``root``."""

    root: Path
    rows: int

    def __post_init__(self) -> None:
        src = self.root / "in"
        src.mkdir(parents=True)
        with open(src / "part-00001.json", "w") as out:
            for i in range(1, self.rows + 1):
                out.write(json.dumps({"id": i, "day": f"2026-11-0{1 + i % 3}", "amount": -1.0 if i % 7 == 0 else i}))
                out.write("\n")
        job = {
            "sources": {
                "in": {
                    "type": "files",
                    "format": "json",
                    "path": str(src),
                    "schema": "id BIGINT, day STRING, amount DOUBLE",
                }
            },
            "converters": [{"type": "check", "expr": "amount >= 0", "reason": "negative amount"}],
            "sinks": {"lake": {"type": "delta", "path": "lake"}},
        }
        (self.root / "jobs").mkdir()
        (self.root / "jobs" / f"{JOB}.yaml").write_text(yaml.safe_dump(job))

    @property
    def warehouse(self) -> Path:
        return self.root / "wh"

    @property
    def good(self) -> list[int]:
        return [i for i in range(1, self.rows + 1) if i % 7]

    def command(self) -> list[str]:
        return [*SUBMIT, f"job={JOB}", f"warehouse={self.warehouse}"]

    def env(self) -> dict[str, str]:
        return {**os.environ, "ENGINE_JOBS_DIR": str(self.root / "jobs")}

    def published(self, table: str = "lake") -> list[int]:
        """The ids the table holds (none when it does not exist)."""
        path = self.warehouse / table
        if not (path / "_delta_log").is_dir():
            return []
        return sorted(r["id"] for r in DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).to_pylist())

    def rerun(self) -> tuple[int, str]:
        """The same command line again, in this process (the test session's Spark): its exit code
        and what it printed."""
        code, _, said = run_cli(self.root / "jobs", f"job={JOB}", f"warehouse={self.warehouse}")
        return code, said


@dataclass
class Submitted:
    """A ``spark-submit.sh`` run started in the background, its output in files."""

    job: Job
    dog: Watchdog
    proc: subprocess.Popen[bytes] = field(init=False)
    seen: set[int] = field(default_factory=set)
    """Every process of the run seen so far (killed, if still there, when the test ends)."""

    def __post_init__(self) -> None:
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.job.command(), stdout=out, stderr=err, env=self.job.env())
        self.dog.track(self.proc.pid, tree=True)

    @property
    def stdout(self) -> Path:
        return self.job.root / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.job.root / "stderr.log"

    def output(self) -> str:
        return f"--- stderr:\n{self.stderr.read_text(errors='replace')[-6000:]}\n--- stdout:\n{self.stdout.read_text()}"

    def until(self, what: str, found: Callable[[], int | bool | None], timeout: float = RUN_SECONDS) -> int:
        """Poll ``found`` until it answers (a pid, or True) while the run lasts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = found()
            if answer:
                return int(answer)
            assert self.proc.poll() is None, f"the run ended before {what}:\n{self.output()}"
            time.sleep(0.005)
        raise AssertionError(f"no {what} within {timeout:.0f}s:\n{self.output()}")

    def child(self, parent: int, marker: str) -> int | None:
        """A child of ``parent`` whose command line holds ``marker`` (remembered for clean-up)."""
        for pid in children(parent):
            if marker in _cmdline(pid):
                self.seen.add(pid)
                self.dog.track(pid)
                return pid
        return None

    def jvm(self) -> int | None:
        """The SparkSubmit JVM: the wrapper's child once ``spark-class`` has exec'd ``java`` (it first
        runs as a shell whose arguments name the class, and that runs a launcher JVM)."""
        found = self.child(self.proc.pid, "org.apache.spark.deploy.SparkSubmit")
        return found if found and _cmdline(found).split(" ")[0].endswith("/java") else None

    def driver(self) -> int | None:
        jvm = self.jvm()
        return self.child(jvm, "main.py") if jvm else None

    def logged(self, line: str) -> bool:
        return line in self.stderr.read_text(errors="replace")

    def wait(self) -> int:
        return self.proc.wait(timeout=RUN_SECONDS)

    def summary(self) -> dict[str, object]:
        lines = self.stdout.read_text().strip().splitlines()
        return json.loads(lines[-1]) if lines else {}  # type: ignore[no-any-return]

    def kill_what_is_left(self) -> None:
        for pid in [self.proc.pid, *self.seen]:
            if _running(pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextmanager
def submitted(job: Job) -> Iterator[Submitted]:
    with watching(job.root / "watchdog.pids") as dog:
        run = Submitted(job, dog)
        try:
            yield run
        finally:
            run.kill_what_is_left()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_jvm_killed_with_sigkill_takes_its_driver_along_and_the_rerun_publishes_once(
    spark: object, tmp_path: Path
) -> None:
    """``kill -9`` of the spark-submit JVM mid-run: the Python driver (its child) is gone within
    seconds instead of living on and renewing the job's lease; the wrapper exits 137; the rerun
    takes the lease (no exit 3), re-executes the batch the dead run planned and publishes every
    valid record once. A process: only one can be killed with SIGKILL and take its child along
    (the rerun runs in this process)."""
    job = Job(tmp_path, rows=400_000)
    with submitted(job) as run:
        run.until("DAG running", lambda: run.logged(f"dag {JOB}: running"))
        jvm, driver = run.until("SparkSubmit JVM", run.jvm), run.until("Python driver", run.driver)
        assert job.published() == [], "killed mid-run: nothing published yet"
        os.kill(jvm, signal.SIGKILL)
        assert run.wait() == 128 + signal.SIGKILL, run.output()
        assert gone_within(driver, 5.0), f"the driver (pid {driver}) outlived its JVM (pid {jvm})"

    code, said = job.rerun()
    assert code == 0, said[-6000:]
    assert job.published() == job.good, "every valid record exactly once"


def _lease_taken(job: Job) -> bool:
    return any((job.warehouse / "_engine" / "leases").glob(f"{JOB}/*.json"))


def _started_set_up(run: Submitted) -> int | None:
    return run.child(run.proc.pid, "scripts/bootstrap.sh")


def _jvm_before_its_driver(run: Submitted) -> int | None:
    """The JVM, while it has no driver that takes SIGTERM: none started yet, or one still starting
    (it inherits the JVM's ignored SIGTERM until it sets its handler)."""
    jvm = run.jvm()
    return jvm if jvm and not any(_catches_sigterm(pid) for pid in children(jvm)) else None


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


MOMENTS = {
    "before-the-jvm": _started_set_up,
    "before-the-driver": _jvm_before_its_driver,
    "during-planning": lambda run: _lease_taken(run.job),
}
"""When the stop comes: the wrapper still setting up (no JVM yet), the JVM started but its driver not
yet able to take the signal, the driver holding the job's lease (planning follows at once)."""


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_stop_at_any_moment_stops_the_run_and_publishes_nothing(spark: object, tmp_path: Path, moment: str) -> None:
    """SIGTERM to ``spark-submit.sh`` at three moments of a run's first seconds: the run ends 143
    (128 + SIGTERM), CANCELLED when its driver had started, and nothing is published: the sink and
    the error table are empty, no run row says it succeeded. Before the fix a stop that came before
    the driver existed (or before it set its handler: it inherits the JVM's ignored SIGTERM) was
    dropped, and the run went on and published. A stopped run leaves nothing a rerun cannot
    finish: the rerun publishes every valid record once. A process: the stop is a signal to the
    wrapper, at moments only a real ``spark-submit.sh`` has (the rerun runs in this process)."""
    job = Job(tmp_path, rows=20_000)
    jvms: set[int] = set()
    with submitted(job) as run:
        run.until(moment, lambda: MOMENTS[moment](run))
        run.proc.send_signal(signal.SIGTERM)
        while run.proc.poll() is None:  # did a JVM start after the stop?
            if (jvm := run.jvm()) is not None:
                jvms.add(jvm)
            time.sleep(0.01)
        assert run.wait() == 128 + signal.SIGTERM, run.output()
        assert all(gone_within(pid, 5.0) for pid in run.seen), "nothing of the run is left running"
        assert run.summary().get("status", "CANCELLED") == "CANCELLED", run.output()
        assert job.published() == [] and _rows(job.warehouse / "_errors" / JOB) == []
        assert not [r for r in _rows(job.warehouse / "_engine" / "runs") if r["status"] != "CANCELLED"]
        if moment == "before-the-jvm":
            assert not jvms, "no JVM was started after the stop"
        if moment == "during-planning":
            assert run.summary()["status"] == "CANCELLED" and run.summary()["stopped_by"] == "received SIGTERM"

    code, said = job.rerun()
    assert code == 0, said[-6000:]
    assert job.published() == job.good


def _rows(path: Path) -> list[dict[str, object]]:
    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def _app(tmp_path: Path, body: str) -> Path:
    """An ``ENGINE_APP`` (what ``spark-submit.sh`` submits instead of ``main.py``) that watches its
    JVM as the engine's driver does, then runs ``body`` without ever setting a handler for SIGTERM
    (it keeps the JVM's ignored one)."""
    app = tmp_path / "app.py"
    app.write_text(f"from engine.cli.jvm_watch import die_with_jvm\ndie_with_jvm()\n{body}\n")
    return app


def _submit_app(app: Path, root: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ENGINE_APP": str(app)}
    return subprocess.Popen([*SUBMIT, f"warehouse={root / 'wh'}"], env=env, stdout=subprocess.DEVNULL)


def test_a_stop_a_driver_never_takes_ends_the_jvm_after_the_grace(tmp_path: Path) -> None:
    """A driver that never sets its SIGTERM handler (here a stand-in app) cannot take a stop: held
    10 s, then the JVM is killed, the driver ends with it, and the wrapper exits 143."""
    app = _app(tmp_path, "import time\ntime.sleep(300)")
    with watching(tmp_path / "watchdog.pids") as dog:
        proc = _submit_app(app, tmp_path)
        dog.track(proc.pid, tree=True)
        try:
            driver = _wait_for_app(proc, app)
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 128 + signal.SIGTERM
            assert 9 <= time.monotonic() - stopped < 30, "held for the grace, then the JVM was killed"
            assert gone_within(driver, 5.0), "the driver ended with its JVM"
        finally:
            with suppress(ProcessLookupError):
                proc.kill()
            proc.wait()


def test_a_run_that_ends_by_itself_while_a_stop_is_held_keeps_its_exit_code(tmp_path: Path) -> None:
    """A stop held for a driver that ends on its own (here: exits 0 two seconds later without
    taking it) is not turned into a kill: the wrapper exits with the run's own code."""
    app = _app(tmp_path, "import time\ntime.sleep(2)")
    proc = _submit_app(app, tmp_path)
    try:
        _wait_for_app(proc, app)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        with suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def _wait_for_app(proc: subprocess.Popen[bytes], app: Path) -> int:
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before its app started"
        for jvm in children(proc.pid):
            for pid in children(jvm):  # the app, not spark-class's shells nor its launcher JVM
                if _cmdline(pid).startswith(f"{PYTHON} {app}"):
                    return pid
        time.sleep(0.01)
    raise AssertionError("the app did not start")
