"""The driver's collector pause: nested across threads, and restored as it was."""

from __future__ import annotations

import gc
import threading

import pytest

from engine.platform.gcpause import gc_paused


def test_the_collector_returns_when_the_last_of_overlapping_pauses_ends() -> None:
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    try:
        with gc_paused():
            thread.start()
            assert inside.wait(10)
            assert not gc.isenabled()
        assert not gc.isenabled(), "the other thread's pause still holds"
    finally:
        release.set()
        thread.join(10)
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled_and_an_error_still_ends_the_pause() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    try:
        with gc_paused():
            raise KeyError("boom")
    except KeyError:
        pass
    assert gc.isenabled()


def test_the_off_switch_leaves_the_collector_running(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_GC_PAUSE", "off")
    with gc_paused():
        assert gc.isenabled()
    monkeypatch.delenv("ENGINE_GC_PAUSE")
    with gc_paused():
        assert not gc.isenabled(), "the switch is read at each pause"
    assert gc.isenabled()
