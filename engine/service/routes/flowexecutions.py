"""``/flowexecutions``: start a flow's execution, follow it, cancel it, read its output."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from engine.service.errors import Invalid
from engine.service.flowstore import StoredFlow
from engine.service.routes.answers import CancelRequested, ExecutionStatus
from engine.service.routes.bodies import ExecutionRequest
from engine.service.routes.deps import Authed, Served, ServiceRoute, find_flow
from engine.service.service import Service
from engine.service.users import User

EXECUTION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

router = APIRouter(prefix="/flowexecutions", route_class=ServiceRoute, tags=["flowexecutions"])


@router.post("", status_code=201, response_model=ExecutionStatus)
def run_flow(me: Authed, service: Served, body: ExecutionRequest) -> dict[str, Any]:
    flow = find_flow(service, body.flowGroup, body.flowName)
    row = start(service, me, flow, trigger="api")
    return {"flowExecutionId": row["execution_id"], **service.executions.describe(row)}


@router.get("/{execution}", response_model=ExecutionStatus)
def get_execution(me: Authed, service: Served, execution: str) -> dict[str, Any]:
    return service.executions.describe(service.executions.get(_execution(execution)))


@router.delete("/{execution}", status_code=202, response_model=CancelRequested)
def cancel_execution(me: Authed, service: Served, execution: str) -> dict[str, Any]:
    row = service.executions.get(_execution(execution))
    flow = service.flows.get(row["flow_group"], row["flow_name"])
    service.groups.check_run(me, row["flow_group"], flow.config.get("owner") if flow else None)
    service.executions.cancel(execution, by=me.name)
    return {**service.executions.describe(row), "cancelRequested": True}


@router.get("/{execution}/output", response_class=PlainTextResponse)
def execution_output(me: Authed, service: Served, execution: str) -> str:
    return service.executions.output(_execution(execution))


def start(service: Service, me: User, flow: StoredFlow, *, trigger: str) -> dict[str, Any]:
    """Start ``flow`` for ``me``, who must be allowed to run it."""
    service.groups.check_run(me, flow.group, flow.config.get("owner"))
    return service.start(flow, by=me.name, trigger=trigger)


def _execution(execution: str) -> str:
    if not EXECUTION_ID.fullmatch(execution):
        raise Invalid(f"`{execution[:80]}` is not an execution's id", key="execution")
    return execution
