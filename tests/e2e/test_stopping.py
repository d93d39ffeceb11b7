"""Runs through ``./spark-submit.sh`` killed at moments a user cannot choose: the JVM killed with
SIGKILL mid-run (its Python driver must end with it, so that the rerun recovers). The process tree
is read from ``/proc``, the tables with delta-rs."""

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

from tests.e2e import SUBMIT
from tests.watchdog import Watchdog, children, stat_fields, watching

pytestmark = pytest.mark.e2e

RUN_SECONDS = 600
JOB = "stopped"


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

    def rerun(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(), env=self.env(), capture_output=True, text=True, timeout=RUN_SECONDS)


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


def test_a_jvm_killed_with_sigkill_takes_its_driver_along_and_the_rerun_publishes_once(tmp_path: Path) -> None:
    """``kill -9`` of the spark-submit JVM mid-run: the Python driver (its child) is gone within
    seconds instead of living on and renewing the job's lease; the wrapper exits 137; the rerun
    takes the lease (no exit 3), re-executes the batch the dead run planned and publishes every
    valid record once."""
    job = Job(tmp_path, rows=400_000)
    with submitted(job) as run:
        run.until("DAG running", lambda: run.logged(f"dag {JOB}: running"))
        jvm, driver = run.until("SparkSubmit JVM", run.jvm), run.until("Python driver", run.driver)
        assert job.published() == [], "killed mid-run: nothing published yet"
        os.kill(jvm, signal.SIGKILL)
        assert run.wait() == 128 + signal.SIGKILL, run.output()
        assert gone_within(driver, 5.0), f"the driver (pid {driver}) outlived its JVM (pid {jvm})"

    rerun = job.rerun()
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-6000:]
    assert job.published() == job.good, "every valid record exactly once"
