"""Who may change and run which flows.

A flow group has owners: users and ``group:<name>`` principals, stored in Delta
(``_engine/service/flowgroups``), newest row per group. The user who creates a group's first flow
through the API makes the group, owned by that user and the user's groups. Only owners and admins
change a group's flows, run them or change its owners. A group that exists only as flow files
(``jobs/flows/<group>/``) has no owners row: its flows are run by admins and by the principal each
flow names as its ``owner``. Template packs keep their own allowed principals, checked by the
compiler against the flow's ``owner`` and, for a user, that user's groups.
"""

from __future__ import annotations

import json
import time
from typing import Any

from engine.commit.lease import Lease
from engine.flow.model import NAME
from engine.service.errors import Forbidden, Invalid
from engine.service.flowstore import held
from engine.service.tables import ServiceTable, newest, utcnow
from engine.service.users import User

GROUP_COLUMNS = (
    ("flow_group", "string"),
    ("owners", "string"),
    ("changed_by", "string"),
    ("changed_at", "timestamp"),
)
GROUP_PREFIX = "group:"


class FlowGroups:
    def __init__(self, root: str) -> None:
        self.root = root
        self.table = ServiceTable(root, "flowgroups", GROUP_COLUMNS)

    def owners(self, group: str) -> list[str] | None:
        """The group's owners; None: no group was made through the API."""
        found = newest(self.table.rows(), "flow_group", order="changed_at").get((group,))
        return None if found is None else list(json.loads(found["owners"]))

    def describe(self, group: str) -> dict[str, Any]:
        return {"flowGroup": group, "owners": self.owners(group) or []}

    def claim(self, group: str, user: User) -> None:
        """Make ``group`` owned by ``user`` and its groups, unless it exists: under a lease per
        group, so of several users making one group at once, one makes it and the others then
        face its owners."""
        if self.owners(group) is not None:
            return
        with held(Lease(self.root, f"group.{group}", run_id=f"claim-{time.time_ns()}", ttl_seconds=30.0), group):
            if self.owners(group) is None:
                self.set_owners(group, sorted(user.principals), by=user)

    def set_owners(self, group: str, owners: list[str], *, by: User) -> None:
        for i, owner in enumerate(owners):
            if not NAME.fullmatch(owner.removeprefix(GROUP_PREFIX)):
                raise Invalid(f"owner `{owner}`: a user name or group:<name>", key=f"owners[{i}]")
        if not owners:
            raise Invalid("a flow group needs at least one owner", key="owners")
        row = {"flow_group": group, "owners": json.dumps(owners), "changed_by": by.name, "changed_at": utcnow()}
        self.table.append([row])

    # -- the rules ------------------------------------------------------------------------------

    def check_change(self, user: User, group: str) -> None:
        """Refuse ``user`` changing the flows (or the owners) of ``group``."""
        owners = self.owners(group)
        if user.admin or owners is None or user.principals & set(owners):
            return
        raise Forbidden(_refusal(user, f"change the flows of group `{group}`", owners))

    def check_run(self, user: User, group: str, flow_owner: str | None) -> None:
        """Refuse ``user`` running a flow of ``group`` (whose config names ``flow_owner``)."""
        owners = self.owners(group)
        allowed = set(owners) if owners is not None else ({flow_owner} if flow_owner else set())
        if user.admin or user.principals & allowed:
            return
        raise Forbidden(_refusal(user, f"run the flows of group `{group}`", sorted(allowed)))


def _refusal(user: User, what: str, allowed: list[str]) -> str:
    who = ", ".join(allowed) if allowed else "admins only"
    groups = ", ".join(user.groups) or "none"
    return f"user `{user.name}` (groups: {groups}) may not {what}: allowed are {who}, and admins"
