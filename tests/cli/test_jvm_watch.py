"""A spark-submit driver ends with its JVM (engine.cli.jvm_watch), without a JVM: a Python process
stands for the JVM and starts the "driver", which calls ``die_with_jvm`` as ``driver_main`` does.
``tests/e2e/test_stopping.py`` kills a real spark-submit JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from engine.cli import jvm_watch
from tests.watchdog import stat_fields

DRIVER = """
import os, sys, time
from engine.cli.jvm_watch import die_with_jvm
die_with_jvm()
print(os.getpid(), flush=True)
time.sleep(120)
"""
"""Stands for the driver: watches its JVM, says its pid, then works for a long time."""
JVM = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
"""Stands for the JVM: runs the driver as its child, and waits for it."""


def _running(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.02)
    return False


@contextmanager
def jvm_with_driver(*driver_prefix: str, jvm_pid: str | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A JVM-like process whose child (through ``driver_prefix``, say a shell) runs the driver with
    spark-submit's ``PYSPARK_GATEWAY_PORT``; ``jvm_pid`` for ``ENGINE_JVM_PID`` (by default the
    JVM-like process's own, as the wrappers export it). Yields it and the driver's pid."""
    env = {**os.environ, "PYSPARK_GATEWAY_PORT": "1"}
    env.pop(jvm_watch.JVM_PID_ENV, None)
    shell = 'exec env ENGINE_JVM_PID="${JVM_PID:-$$}" "$@"'  # this shell becomes the JVM: its pid
    jvm = subprocess.Popen(
        ["/bin/sh", "-c", shell, "jvm", sys.executable, "-c", JVM, *driver_prefix, sys.executable, "-c", DRIVER],
        env={**env, **({"JVM_PID": jvm_pid} if jvm_pid else {})},
        stdout=subprocess.PIPE,
    )
    assert jvm.stdout is not None
    line = jvm.stdout.readline()
    driver = int(line) if line.strip() else 0
    try:
        yield jvm, driver
    finally:
        for pid in (driver, jvm.pid):
            with suppress(ProcessLookupError):
                if pid and _running(pid):
                    os.kill(pid, signal.SIGKILL)
        jvm.wait()
        jvm.stdout.close()


def test_a_driver_whose_jvm_is_killed_ends_with_it() -> None:
    with jvm_with_driver() as (jvm, driver):
        assert driver and _running(driver)
        jvm.kill()
        assert _gone_within(driver, 5.0), "the driver outlived its JVM"


def test_a_driver_started_through_a_script_ends_when_the_jvm_does() -> None:
    """The JVM is not the driver's parent (a script runs ``python`` as its child): the driver looks
    for the JVM by its pid, and the script left behind does not keep it alive."""
    with jvm_with_driver("/bin/sh", "-c", '"$@"; :', "script") as (jvm, driver):
        time.sleep(1.5)
        assert _running(driver), "its JVM still runs: the driver is not ended"
        jvm.kill()
        assert _gone_within(driver, 5.0), "the driver outlived its JVM"


def test_a_driver_whose_jvm_is_gone_before_it_looks_ends_at_once() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()
    with jvm_with_driver("/bin/sh", "-c", '"$@"; :', "script", jvm_pid=str(ended.pid)) as (jvm, driver):
        assert driver == 0, "it ended before saying its pid"
        jvm.wait(timeout=20)


def test_outside_spark_submit_nothing_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test run or a notebook starts its JVM as its own child: no gateway port in its environment."""
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert jvm_watch.die_with_jvm() is None
