"""Kill points and fault injection are one hooks object: a no-op unless a run installed the ones
its environment asks for. No JVM (the kill itself is exercised by tests/commit/test_crash_matrix.py)."""

from __future__ import annotations

import os
import signal

import pytest

from engine import hooks
from engine.commit.killpoints import kill_point
from engine.hooks import Hooks


def test_by_default_every_hook_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINE_KILL_AT", "before_done")
    monkeypatch.setenv("ENGINE_FAIL_DATASETS", "*")
    killed: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(sig))
    kill_point("before_done", "a")  # the environment is read when a run starts, not here
    assert hooks.current() == Hooks() and hooks.current().doomed(["x"]) == [] and killed == []


def test_the_environment_names_the_kill_points_and_the_datasets_to_fail() -> None:
    env = {"ENGINE_KILL_AT": " after_step:2@a, before_done ,", "ENGINE_FAIL_DATASETS": "*/land/b,file:/c"}
    found = Hooks.from_env(env)
    assert found.kill_at == {"after_step:2@a", "before_done"}
    assert found.doomed(["file:/land/a", "file:/land/b", "file:/c"]) == ["file:/land/b", "file:/c"]
    assert Hooks.from_env({"ENGINE_KILL_AT": "", "ENGINE_FAIL_DATASETS": ""}) == Hooks()


@pytest.mark.parametrize(
    ("point", "dag", "kills"),
    [
        pytest.param("before_done", "a", True, id="any-dag"),
        pytest.param("after_step:2", "a", True, id="this-dag"),
        pytest.param("after_step:2", "b", False, id="other-dag"),
        pytest.param("after_step:1", "a", False, id="other-point"),
    ],
)
def test_an_installed_kill_point_kills_the_driver(
    point: str, dag: str, kills: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append((pid, sig)))
    with hooks.installed(Hooks(kill_at=frozenset({"before_done", "after_step:2@a"}))):
        kill_point(point, dag)
    assert killed == ([(os.getpid(), signal.SIGKILL)] if kills else [])
    assert hooks.current() == Hooks()  # the previous hooks are back
