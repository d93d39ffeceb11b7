"""Test and drill hooks: kill points and fault injection, behind one object that does nothing
unless a drill asked for something.

The engine calls :func:`current` at its kill points (:mod:`engine.commit.killpoints`) and where it
reads datasets (:mod:`engine.runtime.faults`); it never reads the environment there. The CLI
installs the hooks a run's environment asks for once, when the run starts
(:func:`installed` with :meth:`Hooks.from_env`), so crash tests and drills keep driving a
``spark-submit`` driver by environment variables:

- ``ENGINE_KILL_AT=<point>[@<dag>][,...]``: the driver kills itself (``SIGKILL``) at that point,
  with its process group when it leads one;
- ``ENGINE_FAIL_DATASETS=<glob>[,...]``: reading a dataset whose URN matches fails on the executors.

This module sits beside :mod:`engine.errors`, outside the layers, so every layer may call it; it
imports nothing of the engine.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["FAIL_DATASETS", "KILL_AT", "Hooks", "current", "installed"]

KILL_AT = "ENGINE_KILL_AT"
FAIL_DATASETS = "ENGINE_FAIL_DATASETS"


@dataclass(frozen=True)
class Hooks:
    """What a drill asked for; the default asks for nothing, so every hook is a no-op."""

    kill_at: frozenset[str] = frozenset()
    """Kill points (``<point>`` or ``<point>@<dag>``) at which the driver kills itself."""
    fail_datasets: tuple[str, ...] = ()
    """Glob patterns of dataset URNs whose reads fail."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Hooks:
        """The hooks :data:`KILL_AT` and :data:`FAIL_DATASETS` ask for (comma-separated lists)."""
        env = os.environ if environ is None else environ
        return cls(frozenset(_items(env.get(KILL_AT, ""))), tuple(_items(env.get(FAIL_DATASETS, ""))))

    def reached(self, point: str, dag: str) -> None:
        """``dag`` reached kill point ``point``: die at once (no cleanup, no ``finally``, no
        atexit), as a lost machine would, if a drill asked for it."""
        if point in self.kill_at or f"{point}@{dag}" in self.kill_at:
            print(f"engine: killed at {point} in dag {dag} ({KILL_AT})", file=sys.stderr, flush=True)
            _die()

    def doomed(self, datasets: list[str]) -> list[str]:
        """Those of ``datasets`` whose reads must fail."""
        return [d for d in datasets if any(fnmatch.fnmatchcase(d, p) for p in self.fail_datasets)]


def _die() -> None:
    """SIGKILL to this driver and, when it leads its process group (a drill started it so), to the
    whole group at once: the JVM it launched (``python main.py``: the JVM is its child) dies with
    it, as on a lost machine, instead of noticing its driver gone and running its shutdown hooks
    (stopping Spark, deleting its temp folders: a second or more of clean-up no crash does). Under
    ``spark-submit`` the driver is the JVM's child and leads no group: it kills itself alone and the
    JVM ends as its Python runner sees it die."""
    me = os.getpid()
    if os.getpgrp() == me:
        os.killpg(me, signal.SIGKILL)
    os.kill(me, signal.SIGKILL)


_current = Hooks()


def current() -> Hooks:
    """The hooks in force (a no-op :class:`Hooks` unless a run installed others)."""
    return _current


@contextmanager
def installed(hooks: Hooks) -> Iterator[Hooks]:
    """``hooks`` in force for the duration (the previous ones again afterwards)."""
    global _current
    previous, _current = _current, hooks
    try:
        yield hooks
    finally:
        _current = previous


def _items(raw: str) -> list[str]:
    return [p.strip() for p in raw.split(",") if p.strip()]
