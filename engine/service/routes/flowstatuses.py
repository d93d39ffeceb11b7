"""``/flowstatuses``: a flow's last executions, newest first."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from engine.service.checks import check_names
from engine.service.routes.answers import ExecutionStatus
from engine.service.routes.deps import Authed, Served, ServiceRoute

MAX_STATUSES = 100
"""Executions ``/flowstatuses`` answers at most."""

router = APIRouter(prefix="/flowstatuses", route_class=ServiceRoute, tags=["flowstatuses"])


@router.get("/{group}/{name}", response_model=list[ExecutionStatus])
def flow_statuses(
    me: Authed, service: Served, group: str, name: str, limit: Annotated[int, Query(ge=1, le=MAX_STATUSES)] = 20
) -> list[dict[str, Any]]:
    check_names(group, name)
    return [service.executions.describe(r) for r in service.executions.of_flow(group, name, limit=limit)]
