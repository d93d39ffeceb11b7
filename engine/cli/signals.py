"""Turning SIGTERM/SIGINT (and the disappearance of ``spark-submit.sh``) into a graceful stop.

The first signal asks the run to stop (:class:`~engine.runtime.stop.Stop`); later ones are
logged and ignored, so a scheduler's repeated TERM does not cut a publish in half. A stop that
must be immediate is SIGKILL: the commit log repairs whatever that interrupts on the next run.

``spark-submit.sh`` (and the ``engine`` command, :class:`engine.cli.launch.StopRelay`) starts the
JVM with SIGINT and SIGTERM ignored (so the JVM outlives the Python driver's clean-up) and passes
the signals it gets on to the driver once the driver catches them: the driver inherits the JVM's
ignored signals until :func:`graceful_stop` sets its handler, and a signal sent before that would be
lost. So a stop that comes before the driver exists or has its handler (the first seconds of a
run, when nothing has been done) is held and delivered the moment it can be; held past a grace
period, the JVM is killed instead. The wrapper exports its pid as ``ENGINE_WRAPPER_PID``: if the
wrapper is killed outright, the driver notices and stops too. A JVM killed outright takes the
driver with it (:mod:`engine.cli.jvm_watch`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from engine.runtime.stop import Stop

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def graceful_stop(stop: Stop) -> Iterator[Stop]:
    """Route SIGTERM/SIGINT to ``stop`` while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.request(f"received {name}", signum):
            said = f"{name} received: stopping (no new DAG starts, running ones are cancelled)"
        else:
            said = f"{name} received again: already stopping"
        # Logged from a thread: the handler runs between two bytecodes of the main thread, which
        # may be inside the logging or stream code it would call (the logging docs warn of this).
        threading.Thread(target=log.warning, args=(said,), name="signal-log", daemon=True).start()

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    watcher = _watch_wrapper(stop)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if watcher is not None:
            watcher.set()


def _watch_wrapper(stop: Stop) -> threading.Event | None:
    """Stop if the ``spark-submit.sh`` that started this run is gone (killed with SIGKILL)."""
    raw = os.environ.get("ENGINE_WRAPPER_PID", "")
    if not raw.isdigit():
        return None
    pid, done = int(raw), threading.Event()

    def watch() -> None:
        while not done.wait(1.0):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                stop.request("spark-submit.sh was killed", signal.SIGTERM)
                log.warning("spark-submit.sh (pid %d) is gone: stopping", pid)
                return
            except PermissionError:
                continue

    threading.Thread(target=watch, name="wrapper-watch", daemon=True).start()
    return done
