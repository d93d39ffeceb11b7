"""The scheduler's decisions with a clock the test moves: which slots start an execution, which are
missed, and that a slot is never started twice, across leaders too. The store and the leader lease
are the real ones; what a start does is recorded instead of launching Spark (the executions
themselves are tested end to end in test_executions.py and test_schedules_e2e.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from engine.service.flowstore import FlowStore, StoredFlow
from engine.service.scheduler import Scheduler, SchedulerConf

T0 = datetime(2026, 11, 27, 12, 0, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, **delta: float) -> None:
        self.now = T0 + timedelta(**delta)


class Started:
    """What the scheduler asked to start: (flow, trigger)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, flow: StoredFlow, trigger: str) -> dict[str, Any]:
        self.calls.append((f"{flow.group}/{flow.name}", trigger))
        return {"execution_id": f"e{len(self.calls)}"}


@pytest.fixture
def store(tmp_path: Path) -> FlowStore:
    return FlowStore(str(tmp_path / "svc"), tmp_path / "no-files")


def scheduled(store: FlowStore, schedule: str, clock: Clock, **more: Any) -> StoredFlow:
    made = store.save("g", "f", {"schedule": schedule, **more}, by="u", action="create")
    return StoredFlow(**{**made.__dict__, "changed_at": clock()})  # the version's time, on the test's clock


def scheduler(store: FlowStore, clock: Clock, started: Started, flows: list[StoredFlow]) -> Scheduler:
    return Scheduler(store.root, flows=lambda: flows, start=started, conf=SchedulerConf(lease_seconds=5), clock=clock)


def test_a_slot_starts_one_execution_when_its_time_comes(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "* * * * *", clock)
    leader = scheduler(store, clock, started, [flow])
    clock.at(seconds=30)
    leader.tick()
    assert started.calls == []
    clock.at(seconds=61)
    leader.tick()
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    clock.at(minutes=2, seconds=1)
    leader.tick()
    assert started.calls == [("g/f", "schedule")] * 2
    decisions = leader.describe(flow)["decisions"]
    assert [(d["slot"], d["decision"], d["flowExecutionId"]) for d in decisions[:2]] == [
        ("2026-11-27T12:02:00+00:00", "started", "e2"),
        ("2026-11-27T12:02:00+00:00", "starting", None),
    ]
    leader.stop()


@pytest.mark.parametrize(
    ("catchup", "expected"),
    [pytest.param(False, [], id="skipped"), pytest.param(True, [("g/f", "catchup")], id="catchup")],
)
def test_slots_missed_while_no_leader_ran_are_skipped_or_run_once(
    store: FlowStore, catchup: bool, expected: list[tuple[str, str]]
) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "*/5 * * * *", clock, catchup=catchup)
    leader = scheduler(store, clock, started, [flow])
    clock.at(minutes=32)  # slots 12:05 ... 12:30 came and went, the last 2 minutes ago
    leader.tick()
    leader.tick()
    assert started.calls == expected
    decisions = leader.describe(flow)["decisions"]
    missed = [d for d in decisions if d["decision"] in ("missed", "started")]
    assert missed[0]["missed"] == 6 and ("6 slot(s) missed" in missed[0]["message"] or catchup)
    clock.at(minutes=35, seconds=2)
    leader.tick()
    assert started.calls == [*expected, ("g/f", "schedule")], "then on time again"
    leader.stop()


def test_a_late_slot_runs_and_the_earlier_missed_ones_are_recorded(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "* * * * *", clock)
    leader = scheduler(store, clock, started, [flow])
    clock.at(minutes=10, seconds=20)
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    kinds = [(d["decision"], d["missed"]) for d in leader.describe(flow)["decisions"]]
    assert ("missed", 9) in kinds
    leader.stop()


def test_one_leader_at_a_time_and_the_next_never_starts_a_slot_again(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "* * * * *", clock)
    first = scheduler(store, clock, started, [flow])
    second = scheduler(store, clock, started, [flow])
    clock.at(seconds=61)
    first.tick()
    second.tick()
    assert first.leader and not second.leader
    assert started.calls == [("g/f", "schedule")]
    first.stop()  # a graceful stop gives the lease back
    second.tick()
    assert second.leader and started.calls == [("g/f", "schedule")], "12:01 was decided by the first leader"
    clock.at(minutes=2, seconds=1)
    second.tick()
    assert started.calls == [("g/f", "schedule")] * 2
    second.stop()


def test_a_schedule_change_takes_effect_at_the_next_tick(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flows = [scheduled(store, "0 * * * *", clock)]
    leader = scheduler(store, clock, started, flows)
    clock.at(minutes=1, seconds=5)
    leader.tick()
    assert started.calls == []
    flows[0] = StoredFlow(**{**flows[0].__dict__, "config": {"schedule": "* * * * *"}, "version": 2})
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    flows[0] = StoredFlow(**{**flows[0].__dict__, "config": {"schedule": ""}, "version": 3})
    clock.at(minutes=5, seconds=1)
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    leader.stop()


def test_seconds_are_a_sixth_field(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "* * * * * */10", clock)
    leader = scheduler(store, clock, started, [flow])
    clock.at(seconds=11)
    leader.tick()
    clock.at(seconds=21)
    leader.tick()
    assert started.calls == [("g/f", "schedule")] * 2
    leader.stop()


def test_a_flow_whose_schedule_cannot_be_read_does_not_stop_the_others(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    good = scheduled(store, "* * * * *", clock)
    broken = StoredFlow(**{**good.__dict__, "name": "a", "config": {"schedule": "0 0 30 2 *"}})  # never fires
    leader = scheduler(store, clock, started, [broken, good])
    clock.at(seconds=61)
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    assert leader.describe(broken)["nextRunTime"] is None
    leader.stop()


def test_another_change_of_the_flow_does_not_lose_a_due_slot(store: FlowStore) -> None:
    clock, started = Clock(), Started()
    flows = [scheduled(store, "* * * * *", clock)]
    leader = scheduler(store, clock, started, flows)
    clock.at(seconds=30)
    leader.tick()
    clock.at(seconds=65)  # the slot of 12:01 came; a new description is saved before the next tick
    flows[0] = StoredFlow(
        **{
            **flows[0].__dict__,
            "version": 2,
            "changed_at": clock(),
            "config": {"schedule": "* * * * *", "description": "x"},
        }
    )
    leader.tick()
    assert started.calls == [("g/f", "schedule")]
    leader.stop()


def test_a_slot_is_claimed_by_one_leader_only(store: FlowStore) -> None:
    """A leader that stalled past its lease and the one that took over may both decide a slot:
    its claim, an exclusive create, lets one start it."""
    clock, started = Clock(), Started()
    flow = scheduled(store, "* * * * *", clock)
    first, second = (scheduler(store, clock, started, [flow]) for _ in range(2))
    slot = T0 + timedelta(minutes=1)
    assert [first._claim(flow, slot), second._claim(flow, slot)] == [True, False]
    assert second._claim(flow, slot + timedelta(minutes=1)), "the next slot is free"
    assert sorted(first.claims.names()) == [f"g.f.{int((slot + timedelta(minutes=1)).timestamp())}"], "older claims go"


@pytest.mark.parametrize("value", [False, "false", "no", 0])
def test_catchup_is_read_as_the_compiler_reads_it(store: FlowStore, value: object) -> None:
    clock, started = Clock(), Started()
    flow = scheduled(store, "*/5 * * * *", clock, catchup=value)
    leader = scheduler(store, clock, started, [flow])
    clock.at(minutes=32)
    leader.tick()
    assert started.calls == []
    leader.stop()
