"""Stop signals relayed from the launcher to the Python driver.

spark-submit starts with SIGINT and SIGTERM ignored (so the JVM outlives the driver's clean-up);
the ones the launcher gets go to the driver (found with ``pgrep``, else ``/proc``) once it catches
them. Until then they are held, and past :data:`STOP_GRACE_SECONDS` spark-submit is killed
(:class:`StopRelay`). See :mod:`engine.cli.signals` for the driver's side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import FrameType

from engine.platform.procs import process_alive


def _drivers(jvm: int, script: str) -> list[int]:
    """The Python driver: the JVM's child running the driver script. ``pgrep`` first (macOS has
    no ``/proc``), ``/proc`` where there is no ``pgrep``."""
    found = _drivers_by_pgrep(jvm, script)
    return _drivers_by_proc(jvm, script) if found is None else found


def _drivers_by_pgrep(jvm: int, script: str) -> list[int] | None:
    """``None`` when ``pgrep`` is missing or fails (exit 1 is "none found", not a failure)."""
    try:
        done = subprocess.run(["pgrep", "-P", str(jvm), "-f", _literal(script)], capture_output=True, text=True)
    except OSError:
        return None
    return [int(pid) for pid in done.stdout.split()] if done.returncode in (0, 1) else None


def _literal(text: str) -> str:
    """``text`` as an extended regular expression (pgrep's pattern) matching only itself."""
    return "".join(f"\\{c}" if c in ".[]()*+?{}|^$\\" else c for c in text)


def _drivers_by_proc(jvm: int, script: str) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == jvm and script in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


STOP_GRACE_SECONDS = 10.0
"""How long a stop is held for a driver that does not catch it yet before spark-submit is killed."""
RELAY_POLL_SECONDS = 0.1


class StopRelay:
    """The stop signals this process gets, passed on to the Python driver once it catches them
    (:mod:`engine.cli.signals`). Until the driver has its handler
    (spark-submit is starting, or the driver is, with the JVM's ignored SIGINT and SIGTERM) a stop
    is held: nothing has been done yet, and the driver gets it the moment it can take it. Held past
    ``grace`` seconds, spark-submit (which ignores both) is killed, and the driver with it
    (:mod:`engine.cli.jvm_watch`); a spark-submit that ends meanwhile (its driver had finished)
    keeps its own exit status. The relaying runs on a thread while the main thread waits."""

    def __init__(self, child: subprocess.Popen[bytes], script: str, *, grace: float = STOP_GRACE_SECONDS) -> None:
        self.child = child
        self.script = script
        self.grace = grace
        self.killed_for: int | None = None
        """The signal for which spark-submit was killed (its exit status then says SIGKILL)."""
        self._pending: tuple[int, int] | None = None
        self._asked = 0
        self._lock = threading.RLock()  # (a second signal may run the handler inside the first)
        self._thread: threading.Thread | None = None

    def handle(self, signum: int, _frame: FrameType | None = None) -> None:
        """The signal handler: note the stop and make sure a relaying thread runs."""
        with self._lock:
            self._asked += 1
            self._pending = (signum, self._asked)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._relay, name="stop-relay", daemon=True)
                self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _relay(self) -> None:
        since = time.monotonic()
        while (pending := self._pending) is not None:
            signum, _ = pending
            drivers = _drivers(self.child.pid, self.script)
            if drivers and all(_catches(pid, signum) for pid in drivers):
                for pid in drivers:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signum)
            elif process_alive(self.child.pid) and time.monotonic() - since >= self.grace:
                self.killed_for = signum
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.child.pid, signal.SIGKILL)
            elif process_alive(self.child.pid):
                time.sleep(RELAY_POLL_SECONDS)
                continue
            with self._lock:  # done with this stop, unless another came meanwhile
                if self._pending == pending:
                    self._pending = None

    def exit_status(self, code: int) -> int:
        """spark-submit's ``code`` as this command's exit status: 128+N for signal N, the stop's
        signal when spark-submit was killed for it (as the driver's own status would say)."""
        if self.killed_for is not None and code == -signal.SIGKILL:
            code = -self.killed_for
        return 128 - code if code < 0 else code


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (``/proc``'s ``SigCgt``). Without
    ``/proc`` (macOS) it is taken to have one; a process that has just ended has none."""
    if not Path("/proc/self/status").exists():
        return True
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False
