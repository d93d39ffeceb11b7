"""Schedules end to end: two service processes on one warehouse, a flow on a schedule of every 20
seconds, real ``spark-submit.sh`` executions. One instance leads; killed, the other takes over,
watches the execution the dead one started, and no slot starts twice. The lake is read with delta-rs."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.service.conftest import Served, service_env
from tests.service.test_executions import ENDED, FLOW, wait_for

pytestmark = pytest.mark.e2e

FLAGS = ("--tick", "0.5", "--leader-ttl", "10")


def leaders(*services: Served) -> list[bool]:
    return [bool(s.call("GET", "/healthz").json()["leader"]) for s in services]


def eventually(check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {seconds}s"
        time.sleep(0.25)


def test_one_leader_schedules_and_another_takes_over_when_it_dies(tmp_path: Path) -> None:
    env = service_env(tmp_path)
    first = Served(tmp_path / "wh", env, flags=FLAGS)
    first.user("carol", "analysts")
    second = Served(first.warehouse, env, flags=FLAGS, tokens=first.tokens)
    first.start()
    second.start()
    eventually(lambda: sorted(leaders(first, second)) == [False, True])
    leader, follower = (first, second) if leaders(first, second)[0] else (second, first)

    body = {"flowGroup": "team", "flowName": "every20", "schedule": "* * * * * */20", **FLOW}
    assert follower.call("POST", "/flowconfigs", "carol", json=body).status_code == 201  # any instance takes it

    def executions() -> list[dict[str, object]]:
        return list(follower.call("GET", "/flowstatuses/team/every20", "carol").json())

    eventually(lambda: len(executions()) == 1, seconds=40)
    [scheduled] = executions()
    assert scheduled["trigger"] == "schedule" and scheduled["requestedBy"] == "scheduler"

    leader.stop(signal.SIGKILL)
    eventually(lambda: leaders(follower) == [True], seconds=15)
    eventually(lambda: len(executions()) == 2, seconds=40)  # the next slot, by the new leader
    changed = follower.call("PUT", "/flowconfigs/team/every20", "carol", json={**body, "schedule": ""})
    assert changed.status_code == 200

    ended = {str(e["flowExecutionId"]): wait_for(follower, str(e["flowExecutionId"]), "carol") for e in executions()}
    assert all(e["executionStatus"] in ENDED for e in ended.values())
    assert sorted(e["executionStatus"] for e in ended.values())[-1] == "SUCCEEDED", ended
    first_run = ended[str(scheduled["flowExecutionId"])]
    assert first_run["executionStatus"] == "SUCCEEDED", "the dead leader's execution was watched to its end"

    rows = DeltaTable(str(first.warehouse / "_engine" / "service" / "schedules")).to_pyarrow_table().to_pylist()
    started = [r for r in rows if r["decision"] == "started"]
    assert len({r["slot"] for r in started}) == len(started) == len(ended), "no slot started twice"
    assert {r["execution_id"] for r in started} == set(ended)
    assert len({r["leader"] for r in started}) == 2, "each leader started one"
    assert DeltaTable(str(first.warehouse / "lake" / "orders")).to_pyarrow_table().num_rows == 46
    follower.stop_gracefully()
