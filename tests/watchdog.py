"""Servers that a killed test run would leave behind, stopped anyway.

A fixture stops its server when the session ends, but only if pytest ends normally. A run killed
from outside (a CI runner's timeout, an OOM kill, ``kill -9``) would leave a PostgreSQL (``pg_ctl``
daemonizes it), a moto server, Spark standalone daemons (each in a process group of its own) or a
flow service running, and their directories in ``/tmp``.

A :class:`Watchdog` is a ``sh`` process in a session of its own that blocks reading a pipe whose
only writer is this Python process. Stopping the server normally disarms it: a line on the pipe,
and the watchdog exits doing nothing. However else this process ends, the kernel closes the pipe,
the read ends without a line, and the watchdog runs the cleanup: the ``stop`` command (``pg_ctl
stop``), then SIGTERM to every process (or process group) it was told of, and to every process
under one tracked with its tree (the flow service's executions run in sessions of their own, which
outlive the service), SIGKILL to what is left after a grace period, and the directory removed.

The pipe's write end is not inheritable, so a server started later does not hold it open; a child
forked from pytest (``os.fork``) would, and delays the cleanup until that child ends too."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

GRACE_SECONDS = 10
"""How long tracked processes get between SIGTERM and SIGKILL."""

_SCRIPT = """
read -r _ && exit 0
{stop}
started() {{ sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }}
ours() {{  # $1: a pid, or a process group as -pgid; $2: the start time of that pid when it was tracked
  q=${{1#-}}
  [ -r "/proc/$q/stat" ] || {{ [ "$1" != "$q" ]; return; }}  # a group may outlive its leader; a pid is gone
  [ "$(started "$q")" = "$2" ]  # not a new process that was given a freed pid
}}
table() {{  # "pid parent start" of every process
  for s in /proc/[0-9]*/stat; do
    {{ read -r line < "$s"; }} 2>/dev/null || continue
    p=${{line%% *}}
    set -- ${{line##*) }}
    echo "$p $2 ${{20}}"
  done
}}
under() {{  # $1: a pid; "pid start" of every process under it, found while they all still run
  table > {pids}.table
  found=" $1 " more=1
  while [ $more = 1 ]; do
    more=0
    while read -r p pp t; do
      case "$found" in *" $p "*) continue ;; *" $pp "*) found="$found$p " more=1; echo "$p $t" ;; esac
    done < {pids}.table
  done
}}
signal() {{ while read -r p t; do ours "$p" "$t" && kill "-$1" "$p" 2>/dev/null; done < {pids}.all; }}
alive() {{
  while read -r p t; do ours "$p" "$t" && kill -0 "$p" 2>/dev/null && return 0; done < {pids}.all
  return 1
}}
if [ -f {pids} ]; then
  while read -r p t; do  # +pid: that process and its tree
    echo "${{p#+}} $t"
    case $p in +*) ours "${{p#+}}" "$t" && under "${{p#+}}" ;; esac
  done < {pids} > {pids}.all
  signal TERM
  i=0
  while alive && [ $i -lt {ticks} ]; do sleep 0.2; i=$((i + 1)); done
  signal KILL
fi
{remove}
"""


class Watchdog:
    """Cleans up after a server should this process die without stopping it (see the module).

    ``pids`` is where the tracked pids are kept (a file in the server's directory, or beside it);
    ``remove`` is the directory to delete, if any; ``stop`` a command run first."""

    def __init__(self, pids: Path, *, remove: Path | None = None, stop: Sequence[str] = ()) -> None:
        self.pids = pids
        script = _SCRIPT.format(
            stop=f"{shlex.join(stop)} >/dev/null 2>&1" if stop else "",
            pids=shlex.quote(str(pids)),
            ticks=GRACE_SECONDS * 5,
            remove=f"rm -rf {shlex.quote(str(remove))}" if remove is not None else "",
        )
        read, self._write = os.pipe()  # both ends non-inheritable: no later child holds the write end
        try:
            self._proc = subprocess.Popen(
                ["sh", "-c", script],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # no signal meant for pytest's group (Ctrl-C) reaches it
            )
        finally:
            os.close(read)

    def track(self, pid: int, *, group: bool = False, tree: bool = False) -> None:
        """Stop ``pid`` (its whole process group when ``group``: ``pid`` leads it; with ``tree``,
        every process under it too, whatever its session, as they are when the watchdog fires) if
        this process dies. Its start time goes with it: a pid freed and given to another process is
        left alone."""
        assert not (group and tree), "a group or a tree, not both"
        mark = "-" if group else "+" if tree else ""
        with self.pids.open("a") as out:
            out.write(f"{mark}{pid} {_start_time(pid)}\n")

    def disarm(self) -> None:
        """The server was stopped normally: the watchdog exits and does nothing."""
        if self._write < 0:
            return
        with contextlib.suppress(OSError):  # the watchdog is gone already (someone killed it)
            os.write(self._write, b"disarmed\n")
        os.close(self._write)
        self._write = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and
    parentheses): the state first, the process group third, the start time twentieth; ``None``
    for no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run (its direct children, from ``/proc``): those
    of each of its threads (the service starts executions from its request threads); none for a
    process that ended, even while its threads are listed."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
    except OSError:  # the process ended meanwhile (a launcher JVM spark-class starts and ends)
        return found
    for task in tasks:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            found += [int(c) for c in task.read_text().split()]
    return found


def _start_time(pid: int) -> str:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``)."""
    fields = stat_fields(pid)
    return "gone" if fields is None else fields[19]


@contextlib.contextmanager
def watching(pids: Path, *, remove: Path | None = None, stop: Sequence[str] = ()) -> Iterator[Watchdog]:
    """A :class:`Watchdog`, disarmed when the block ends (the block stops the server itself)."""
    dog = Watchdog(pids, remove=remove, stop=stop)
    try:
        yield dog
    finally:
        dog.disarm()
