"""A ``spark-submit`` driver dies with its JVM.

Under ``spark-submit`` the Python driver is a child of the JVM (Spark's ``PythonRunner`` starts it
and waits for it). A JVM killed outright (``kill -9``, the OOM killer) takes Spark with it but not
its child: the driver went on, its lease renewed by a thread of its own, and every rerun of the job
was refused (exit 3, "its lease expires on its own", which it never did) until someone found the
orphan by its pid. Without its JVM a driver can do nothing more (every read, staging and publish
goes through it), so it ends at once, as if it had been killed with it: SIGKILL, no clean-up, which
is a ``kill -9`` of the driver, the crash the commit log repairs on the next run. Its lease then
names a dead pid, which a rerun on this host takes over at once.

Two ways, so that the JVM's end is noticed at once and everywhere:

- on Linux the kernel sends the driver SIGKILL as its parent ends (``PR_SET_PDEATHSIG``). That
  signal comes when the parent *thread* ends: Spark starts the driver from the thread that then
  waits for it, so that thread ends only after the driver;
- a thread of the driver looks every :data:`POLL_SECONDS` whether the JVM still runs (other
  systems, a parent that is not the JVM itself, such as a script around ``python``).

Which JVM: the one the wrappers name (``ENGINE_JVM_PID``: ``spark-submit.sh`` and the ``engine``
command start the JVM from a shell that execs it, so they know its pid before the driver
exists), else the driver's parent as it starts. A driver whose JVM has already gone when it
starts (a stop that killed a JVM just as it started the driver) ends at once. Outside
``spark-submit`` (no ``PYSPARK_GATEWAY_PORT``: a test, a notebook, whose JVM is their own child)
nothing is watched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path

__all__ = ["JVM_PID_ENV", "die_with_jvm"]

JVM_PID_ENV = "ENGINE_JVM_PID"
POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1


def die_with_jvm() -> int | None:
    """Under ``spark-submit``, end this driver when its JVM ends; the JVM's pid (None: not a
    ``spark-submit`` driver, nothing watched)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    named = os.environ.get(JVM_PID_ENV, "")
    jvm = int(named) if named.isdigit() else os.getppid()
    direct = os.getppid() == jvm
    if direct:
        _kill_me_with_my_parent()
    if not _jvm_runs(jvm, direct):  # gone before the kernel was asked to tell
        _die(jvm)
    threading.Thread(target=_watch, args=(jvm, direct), name="jvm-watch", daemon=True).start()
    return jvm


def _kill_me_with_my_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch(jvm: int, direct: bool) -> None:
    while _jvm_runs(jvm, direct):
        time.sleep(POLL_SECONDS)
    _die(jvm)


def _jvm_runs(jvm: int, direct: bool) -> bool:
    """Whether the JVM still runs. The JVM's child sees its end in its own parent, which changes
    as the JVM exits (before anyone reaps it); otherwise the JVM is looked up: gone, a zombie, or
    a process started after this one (its pid reused) is not it."""
    if direct:
        return os.getppid() == jvm
    try:
        os.kill(jvm, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    jvm_stat, own_stat = _stat(jvm), _stat(os.getpid())
    if jvm_stat is None or own_stat is None:
        return True  # no /proc (macOS): the pid is all there is to go by
    return jvm_stat[0] != "Z" and int(jvm_stat[19]) <= int(own_stat[19])


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command's name: state first, start time at index 19."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _die(jvm: int) -> None:
    """End at once, as a ``kill -9`` would: nothing more is done, nothing more is written."""
    with contextlib.suppress(OSError):  # the JVM read this stream: most likely nobody does now
        os.write(2, f"engine: the driver's JVM (pid {jvm}) is gone: the driver ends with it\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)
