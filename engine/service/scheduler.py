"""Flows run on their cron schedules, by exactly one instance of the service: the leader.

Every instance runs a :class:`Scheduler` thread. Each tick it tries to take, or keeps renewing,
the leader lease (``_engine/service/leases/scheduler``, an :class:`engine.commit.lease.Lease`: an
exclusive create on the store, renewed while held). A leader that dies is replaced within the
lease's TTL, at once by an instance on the same host (which sees the pid gone).

The leader looks at every flow with a ``schedule`` (read each tick, so a change takes effect
without a restart) and the slots (cron fire times) due since the flow's last decided slot, or since
the version that set its schedule. Each decision is appended to ``_engine/service/schedules``
*before* an execution starts, so a new leader never starts a slot again: a slot runs at most
once. A slot found more than :data:`MISSED_AFTER_SECONDS` late was missed (no leader ran then):
skipped by default, or run once for all the missed slots when the flow says ``catchup = true``;
either way a row says so (``GET /flowconfigs/{group}/{name}/schedule``).

Cron expressions have five fields (minute hour day-of-month month day-of-week) or six, the sixth
being seconds (croniter's form).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]
from pydantic import ValidationError

from engine.commit.lease import Lease
from engine.errors import JobBusyError
from engine.flow.model import FlowConf
from engine.service.flowstore import StoredFlow
from engine.service.tables import ServiceTable, newest
from engine.storage.blobs import blobs

log = logging.getLogger(__name__)

SCHEDULE_COLUMNS = (
    ("flow_group", "string"),
    ("flow_name", "string"),
    ("slot", "timestamp"),
    ("decision", "string"),
    ("missed", "long"),
    ("execution_id", "string"),
    ("message", "string"),
    ("leader", "string"),
    ("decided_at", "timestamp"),
)
MISSED_AFTER_SECONDS = 60.0
"""A slot found later than this after its time was missed (no leader was running then)."""
MAX_SLOTS = 10_000
"""Slots counted at most per flow and tick (a every-second schedule missed for days)."""
SCHEDULER = "scheduler"
"""Who scheduled executions are requested by."""


@dataclass(frozen=True)
class SchedulerConf:
    tick_seconds: float = 2.0
    """How often an instance looks for the lease and, as leader, for due slots."""
    lease_seconds: float = 30.0
    """The leader lease's TTL: a leader that died on another host is replaced within it."""


class Scheduler:
    """The schedule loop of one instance. ``start`` is a callable that starts an execution of a
    flow (the service's own, with its owner's groups); ``flows`` lists the live flows."""

    def __init__(
        self,
        root: str,
        *,
        flows: Callable[[], list[StoredFlow]],
        start: Callable[[StoredFlow, str], dict[str, Any]],
        conf: SchedulerConf = SchedulerConf(),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.root = root
        self.flows = flows
        self.start_execution = start
        self.conf = conf
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.table = ServiceTable(root, "schedules", SCHEDULE_COLUMNS)
        self.claims = blobs(f"{root}/slots")
        """One file per flow, its last started slot, made exclusively (``<group>.<name>.<epoch>``)."""
        self._floors: dict[tuple[str, str], tuple[str, datetime]] = {}
        self.identity = f"{socket.gethostname()}:{os.getpid()}"
        self.started = self.clock()
        self._lease: Lease | None = None
        self._last: dict[tuple[str, str], datetime] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lag_seconds = 0.0
        """How late the last slot started was, as the leader found it (a metric)."""

    @property
    def leader(self) -> bool:
        try:
            return self._lease is not None and self._lease.still_held()
        except Exception:  # the store unreachable: not a leader that can prove it
            return False

    # -- the loop -------------------------------------------------------------------------------

    def run_in_background(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._lease is not None:
            self._lease.release()  # the next leader need not wait for the TTL
            self._lease = None

    def _loop(self) -> None:
        while not self._stop.wait(self.conf.tick_seconds):
            try:
                self.tick()
            except Exception:  # a bad tick (the store unreachable) must not end scheduling
                log.exception("scheduler: the tick failed; trying again in %.0fs", self.conf.tick_seconds)

    def tick(self) -> None:
        if not self._lead():
            return
        now = self.clock()
        for flow in self.flows():
            schedule = str(flow.config.get("schedule") or "")
            if not schedule:
                continue
            try:
                self._decide(flow, schedule, now)
            except Exception:  # one flow's trouble (a cron that never fires) is not the others'
                log.exception("scheduler: flow %s/%s, schedule `%s`: no decision", flow.group, flow.name, schedule)

    # -- leadership -----------------------------------------------------------------------------

    def _lead(self) -> bool:
        if self._lease is not None:
            if self._lease.still_held():
                return True
            log.warning("scheduler: this instance lost the leader lease; another schedules now")
            lost, self._lease = self._lease, None
            with suppress(Exception):
                lost.release()  # (its renewal thread ends; its record, if still there, goes)
            return False
        lease = Lease(self.root, SCHEDULER, run_id=f"scheduler-{self.identity}", ttl_seconds=self.conf.lease_seconds)
        try:
            lease.acquire()
        except JobBusyError:
            return False
        try:
            decided = self._decided()  # what earlier leaders decided: read before leading
        except Exception:
            lease.release()
            raise
        self._lease, self._last, self._floors = lease, decided, {}
        log.info("scheduler: this instance (%s) is the leader", self.identity)
        return True

    def _decided(self) -> dict[tuple[str, str], datetime]:
        found = newest(self.table.rows(fresh=True), "flow_group", "flow_name", order="slot")
        return {k: row["slot"] for k, row in found.items()}  # type: ignore[misc]

    # -- one flow -------------------------------------------------------------------------------

    def _decide(self, flow: StoredFlow, schedule: str, now: datetime) -> None:
        key = (flow.group, flow.name)
        due = _slots(schedule, self._since(flow, schedule), now)
        if not due:
            return
        latest = due[-1]
        on_time = (now - latest).total_seconds() <= MISSED_AFTER_SECONDS
        late = [s for s in due[:-1] if (now - s).total_seconds() > MISSED_AFTER_SECONDS]
        missed = late if on_time else due  # (slots within the window run as one with the latest)
        catchup = _catchup(flow)
        if missed and not (catchup and not on_time):
            what = "run once by the slot on time" if catchup else "skipped"
            message = f"{len(missed)} slot(s) missed from {missed[0]:%Y-%m-%d %H:%M:%S}: {what}"
            self._record(flow, missed[-1], "missed", len(missed), None, message)
        if on_time or catchup:
            trigger = "schedule" if on_time else "catchup"
            self._run(flow, latest, trigger, len(missed) if catchup else 0, now)
        else:
            self._last[key] = latest

    def _since(self, flow: StoredFlow, schedule: str) -> datetime:
        """Where the flow's slots are counted from: its last decided slot, or when its schedule
        was set (the version that changed it; the service's start for a flow file), whichever
        is later. Another change of the flow keeps the count going."""
        key = (flow.group, flow.name)
        known = self._floors.get(key)
        if known is None or known[0] != schedule:
            new_leader = known is None and key in self._last  # then from what the last one decided
            floor = self._last[key] if new_leader else flow.changed_at or self.started
            known = self._floors[key] = (schedule, floor)
        return max(self._last.get(key, known[1]), known[1])

    def _run(self, flow: StoredFlow, slot: datetime, trigger: str, missed: int, now: datetime) -> None:
        if not self.leader:  # it stalled past its TTL and lost the lease: the new leader decides
            return
        if not self._claim(flow, slot):  # a leader that stalled and one that took over: one starts it
            log.warning("scheduler: flow %s/%s: the slot %s was started by another leader", flow.group, flow.name, slot)
            self._last[(flow.group, flow.name)] = slot
            return
        message = f"{trigger}: the slot of {slot:%Y-%m-%d %H:%M:%S}" + (f" and {missed} missed" if missed else "")
        self._record(flow, slot, "starting", missed, None, message)
        self.lag_seconds = max(0.0, (now - slot).total_seconds())
        try:
            row = self.start_execution(flow, trigger)
        except Exception as exc:  # the slot is decided: it is not tried again
            log.exception("scheduler: flow %s/%s could not be started", flow.group, flow.name)
            self._record(flow, slot, "failed", missed, None, f"{type(exc).__name__}: {exc}")
            return
        self._record(flow, slot, "started", missed, row["execution_id"], message)

    def _claim(self, flow: StoredFlow, slot: datetime) -> bool:
        """Claim ``slot`` of ``flow`` with an exclusive create: True for one leader only. Older
        claims of the flow are deleted (the decisions table keeps the history)."""
        prefix = f"{flow.group}.{flow.name}."
        if not self.claims.create(f"{prefix}{int(slot.timestamp())}", self.identity.encode()):
            return False
        for name in self.claims.names():
            stamp = name.removeprefix(prefix)
            if name.startswith(prefix) and stamp.isdigit() and int(stamp) < int(slot.timestamp()):
                self.claims.delete(name)
        return True

    def _record(
        self, flow: StoredFlow, slot: datetime, decision: str, missed: int, execution: str | None, message: str
    ) -> None:
        row = {
            "flow_group": flow.group,
            "flow_name": flow.name,
            "slot": slot,
            "decision": decision,
            "missed": missed,
            "execution_id": execution,
            "message": message,
            "leader": self.identity,
            "decided_at": self.clock(),
        }
        self.table.append([row])
        key = (flow.group, flow.name)
        self._last[key] = max(slot, self._last.get(key, slot))

    # -- reading --------------------------------------------------------------------------------

    def describe(self, flow: StoredFlow, *, limit: int = 20) -> dict[str, Any]:
        """The flow's schedule, its next slot and the last decisions, newest first."""
        schedule = str(flow.config.get("schedule") or "")
        rows = [r for r in self.table.rows() if (r["flow_group"], r["flow_name"]) == (flow.group, flow.name)]
        rows.sort(key=lambda r: (r["slot"], r["decided_at"]), reverse=True)
        now = self.clock()
        try:
            upcoming = croniter(schedule, now).get_next(datetime) if schedule else None
        except Exception:  # (a stored schedule that never fires)
            upcoming = None
        return {
            "flowGroup": flow.group,
            "flowName": flow.name,
            "schedule": schedule,
            "catchup": bool(flow.config.get("catchup")),
            "nextRunTime": upcoming.isoformat() if upcoming else None,
            "decisions": [
                {
                    "slot": r["slot"].isoformat(),
                    "decision": r["decision"],
                    "missed": r["missed"],
                    "flowExecutionId": r["execution_id"],
                    "message": r["message"],
                    "leader": r["leader"],
                }
                for r in rows[:limit]
            ],
        }


def _slots(schedule: str, since: datetime, now: datetime) -> list[datetime]:
    """The fire times of ``schedule`` in (``since``, ``now``]: the first :data:`MAX_SLOTS` and
    the last."""
    found: list[datetime] = []
    it = croniter(schedule, since)
    while len(found) < MAX_SLOTS:
        slot = it.get_next(datetime)
        if slot > now:
            return found
        found.append(slot)
    last = croniter(schedule, now + timedelta(microseconds=1)).get_prev(datetime)
    return [*found, last] if last > found[-1] else found


def _catchup(flow: StoredFlow) -> bool:
    """The flow's ``catchup``, read as the compiler reads it (``"false"`` is false)."""
    try:
        return FlowConf.model_validate(flow.config).catchup
    except ValidationError:
        return False
