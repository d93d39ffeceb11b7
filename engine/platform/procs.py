"""Processes of this host as ``/proc`` tells them: whether one runs (a zombie does not), and when it
started (which tells a reused pid apart). Without ``/proc`` (macOS) a process that answers signal 0
runs, and its start is unknown."""

from __future__ import annotations

import os
from pathlib import Path


def pid_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` of this host runs, and is the one that started at ``start`` (its
    :func:`pid_start`; None: any), not a later process given the same pid. A zombie (ended, not yet
    reaped) does not run: a driver killed along with its JVM is one until the process that adopted
    it reaps it, which some init processes do late or never."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return (start is None or pid_start(pid) in (None, start)) and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
