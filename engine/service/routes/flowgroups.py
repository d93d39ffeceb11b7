"""``/flowgroups``: a flow group's owners, who change and run its flows."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine.flow.limits import MAX_OWNER
from engine.service.access import GROUP_PREFIX
from engine.service.checks import check_group, check_name
from engine.service.errors import Forbidden
from engine.service.routes.answers import FlowGroup
from engine.service.routes.bodies import FlowGroupOwners
from engine.service.routes.deps import Authed, Served, ServiceRoute

router = APIRouter(prefix="/flowgroups", route_class=ServiceRoute, tags=["flowgroups"])


@router.get("/{group}", response_model=FlowGroup)
def get_group(me: Authed, service: Served, group: str) -> dict[str, Any]:
    check_group(group)
    return service.groups.describe(group)


@router.put("/{group}", response_model=FlowGroup)
def set_group(me: Authed, service: Served, group: str, body: FlowGroupOwners) -> dict[str, Any]:
    """Replace the group's owners. A group is made by creating a flow in it, or by an admin here."""
    check_group(group)
    for i, owner in enumerate(body.owners):  # (the model bounds the whole text; the name is bounded alone)
        check_name(owner.removeprefix(GROUP_PREFIX), f"owners[{i}]", MAX_OWNER)
    if service.groups.owners(group) is None and not me.admin:
        raise Forbidden(f"flow group `{group}` has no owners yet: it is made by creating a flow in it, or by an admin")
    service.groups.check_change(me, group)
    service.groups.set_owners(group, list(body.owners), by=me)
    return service.groups.describe(group)
