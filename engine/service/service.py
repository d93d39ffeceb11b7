"""What the flow service's routes serve: its stores, its compiler and its scheduler, kept on the app
(``app.state.service``) so that each router reaches them through a dependency, not a closure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.service.access import FlowGroups
from engine.service.checks import FlowChecks
from engine.service.executions import Executions
from engine.service.flowstore import FlowStore, StoredFlow
from engine.service.scheduler import Scheduler
from engine.service.users import Users


@dataclass
class Service:
    """What the API serves: the stores under ``<warehouse>/_engine/service`` and the compiler."""

    users: Users
    flows: FlowStore
    groups: FlowGroups
    checks: FlowChecks
    executions: Executions
    scheduler: Scheduler | None = None
    """None: this instance never schedules (``serve.sh --no-scheduler``)."""

    def start(self, flow: StoredFlow, *, by: str, trigger: str) -> dict[str, Any]:
        """Start an execution of ``flow`` as its owner, whose groups the template packs see. A flow
        stored through the API is compiled first, as when it was stored (it may predate a limit,
        or its templates may have changed): one that is refused now starts no execution
        (:class:`Invalid` naming the key). A flow file is the deployment's, checked by its run."""
        groups = self.owner_groups(flow.config.get("owner"))
        if flow.origin == "api":
            self.checks.compile(flow.config, flow.group, flow.name, groups=groups)
        return self.executions.start(flow, by=by, trigger=trigger, owner_groups=groups)

    def owner_groups(self, owner: str | None) -> tuple[str, ...]:
        """The groups of the user a flow runs as (for the packs' ``group:<name>`` principals)."""
        found = self.users.listed().get(owner or "")
        if found is None or found["disabled"]:
            return ()
        return tuple(json.loads(str(found["groups"])))
