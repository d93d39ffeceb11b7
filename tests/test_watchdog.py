"""tests/watchdog.py: what a test run killed from outside leaves behind is stopped and removed.

Each test kills, with SIGKILL, a Python process that armed a watchdog (as pytest would be killed
by a CI runner's timeout), then watches the processes it had started through ``/proc``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cluster import group_members
from tests.watchdog import Watchdog, stat_fields

REPO = Path(__file__).resolve().parents[1]


def _gone(pid: int) -> bool:
    """No such process, or a zombie (its parent died; init reaps it in its own time)."""
    fields = stat_fields(pid)
    return fields is None or fields[0] == "Z"


def _eventually(check: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _killed_after(script: str, tmp_path: Path) -> dict[str, object]:
    """Run ``script`` in a Python process of its own; once it prints a JSON line, SIGKILL it and
    return what it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        said = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return dict(said)


def test_a_killed_process_leaves_neither_its_processes_nor_their_directory(tmp_path: Path) -> None:
    base = tmp_path / "server"
    said = _killed_after(
        f"""
        import json, subprocess, time
        from pathlib import Path
        from tests.watchdog import Watchdog
        base = Path({str(base)!r}); base.mkdir()
        dog = Watchdog(base / "watchdog.pids", remove=base)
        one = subprocess.Popen(["sleep", "600"])
        group = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"], start_new_session=True)
        dog.track(one.pid)
        dog.track(group.pid, group=True)
        time.sleep(0.3)  # the group's second sleep started
        print(json.dumps({{"one": one.pid, "group": group.pid}}), flush=True)
        time.sleep(600)
        """,
        tmp_path,
    )
    one, group = int(str(said["one"])), int(str(said["group"]))
    assert _eventually(lambda: _gone(one) and not group_members(group) and not base.exists()), (
        f"left: {[] if _gone(one) else [one]} {group_members(group)}, directory {base.exists()}"
    )


def test_a_tree_is_stopped_with_the_processes_it_started_in_sessions_of_their_own(tmp_path: Path) -> None:
    """As the flow service starts its executions: each in a session of its own, which outlives
    the service (a signal to the service's group would miss them)."""
    said = _killed_after(
        f"""
        import json, subprocess, sys, time
        from pathlib import Path
        from tests.watchdog import Watchdog
        dog = Watchdog(Path({str(tmp_path / "watchdog.pids")!r}))
        starts = "import subprocess, time; subprocess.Popen(['sleep', '600'], start_new_session=True); time.sleep(600)"
        service = subprocess.Popen([sys.executable, "-c", starts])
        dog.track(service.pid, tree=True)
        time.sleep(0.5)  # its execution started
        execution = int(open(f"/proc/{{service.pid}}/task/{{service.pid}}/children").read().split()[0])
        session = open(f"/proc/{{execution}}/stat").read().rsplit(")", 1)[1].split()[3]
        print(json.dumps({{"service": service.pid, "execution": execution, "session": int(session)}}), flush=True)
        time.sleep(600)
        """,
        tmp_path,
    )
    service, execution = int(str(said["service"])), int(str(said["execution"]))
    assert said["session"] == execution  # a session of its own: it leads it
    assert _eventually(lambda: _gone(service) and _gone(execution)), (
        f"left: service {not _gone(service)}, execution {not _gone(execution)}"
    )


def test_a_pid_given_to_another_process_is_left_alone(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        base = tmp_path / "server"
        _killed_after(
            f"""
            import json, time
            from pathlib import Path
            from tests.watchdog import Watchdog
            base = Path({str(base)!r}); base.mkdir()
            dog = Watchdog(base / "watchdog.pids", remove=base)
            # as if the server had had this pid and died, and the pid then went to another process
            (base / "watchdog.pids").write_text("{bystander.pid} 1\\n")
            print(json.dumps({{}}), flush=True)
            time.sleep(600)
            """,
            tmp_path,
        )
        assert _eventually(lambda: not base.exists())  # the watchdog did run
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_disarmed_watchdog_stops_nothing(tmp_path: Path) -> None:
    server = subprocess.Popen(["sleep", "600"])
    try:
        dog = Watchdog(tmp_path / "watchdog.pids", remove=tmp_path / "kept")
        (tmp_path / "kept").mkdir()
        dog.track(server.pid)
        dog.disarm()
        assert dog._proc.returncode == 0  # it read the line and exited
        assert server.poll() is None and (tmp_path / "kept").exists()
    finally:
        server.kill()
        server.wait()


@pytest.mark.postgres
def test_a_killed_run_leaves_no_postgresql_running(tmp_path: Path) -> None:
    """``pg_ctl`` daemonizes the server: the process that started it being killed stops nothing."""
    said = _killed_after(
        """
        import json, time
        from pathlib import Path
        from tests.postgres import running_postgres
        with running_postgres() as pg:
            data = Path(pg.psql("SHOW data_directory").strip())
            postmaster = int((data / "postmaster.pid").read_text().split()[0])
            print(json.dumps({"data": str(data), "postmaster": postmaster}), flush=True)
            time.sleep(600)
        """,
        tmp_path,
    )
    postmaster, base = int(str(said["postmaster"])), Path(str(said["data"])).parent
    assert base.name.startswith("engine-pg-")
    assert _eventually(lambda: _gone(postmaster) and not base.exists(), timeout=60), (
        f"postmaster {postmaster} gone: {_gone(postmaster)}; {base} exists: {base.exists()}"
    )
