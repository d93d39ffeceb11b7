"""``/flowconfigs``: FlowConfigs, their versions and compiled jobs. A flow is checked as its next
version (:mod:`engine.service.checks`) and compiled before it is stored; a list answers each flow's
summary, a page at a time."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from engine.flow import FlowPlan
from engine.service.checks import check_group, check_names, check_shape, hide_secrets, seal_secrets
from engine.service.errors import Conflict, Forbidden, NotFound
from engine.service.flowstore import Action, StoredFlow
from engine.service.routes.answers import Deleted, FlowAnswer, FlowSchedule, FlowSummary, FlowVersion, JobSpecs
from engine.service.routes.bodies import FlowConfigVersion, NewFlowConfig
from engine.service.routes.deps import PAGE, Authed, Limit, Offset, Served, ServiceRoute, find_flow
from engine.service.routes.flowexecutions import start
from engine.service.service import Service
from engine.service.users import User

HISTORY_PAGE = 20
"""Versions a flow's history answers by default, at most :data:`MAX_HISTORY_PAGE` (each is a whole FlowConfig)."""
MAX_HISTORY_PAGE = 100
LISTED_DESCRIPTION = 200
"""The characters of a description a list shows (the flow itself has it whole)."""
SUMMARY = ("owner", "description", "schedule", "source", "destinations", "templateUris", "runImmediately", "catchup")
"""The FlowConfig keys a list shows of each flow, besides its key and version (not its properties or datasets)."""

router = APIRouter(prefix="/flowconfigs", route_class=ServiceRoute, tags=["flowconfigs"])


@router.post("", status_code=201, response_model=FlowAnswer)
def create_flow(me: Authed, service: Served, body: NewFlowConfig) -> dict[str, Any]:
    config = body.model_dump(exclude_unset=True)
    stored, plan = _save(service, me, body.flowGroup, body.flowName, config, action="create")
    return _answer(stored, _run_if_asked(service, me, stored, plan))


@router.get("", response_model=list[FlowSummary])
def list_flows(
    me: Authed,
    service: Served,
    response: Response,
    flowGroup: str | None = None,
    limit: Limit = PAGE,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """Each flow's summary (:data:`SUMMARY`), by group and name; ``X-Total-Count`` says how
    many there are in all."""
    if flowGroup is not None:
        check_group(flowGroup)
    flows = service.flows.listed(flowGroup)
    response.headers["X-Total-Count"] = str(len(flows))
    return [_summary(f) for f in flows[offset : offset + limit]]


@router.get("/{group}/{name}", response_model=FlowAnswer)
def get_flow(me: Authed, service: Served, group: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = hide_secrets(find_flow(service, group, name).describe())
    return found


@router.put("/{group}/{name}", response_model=FlowAnswer)
def update_flow(me: Authed, service: Served, group: str, name: str, body: FlowConfigVersion) -> dict[str, Any]:
    stored, plan = _save(service, me, group, name, body.model_dump(exclude_unset=True), action="update")
    return _answer(stored, _run_if_asked(service, me, stored, plan))


@router.delete("/{group}/{name}", response_model=Deleted)
def delete_flow(me: Authed, service: Served, group: str, name: str) -> dict[str, Any]:
    find_flow(service, group, name)
    service.groups.check_change(me, group)
    stored = service.flows.save(group, name, None, by=me.name, action="delete")
    return {"flowGroup": group, "flowName": name, "version": stored.version, "deleted": True}


@router.get("/{group}/{name}/jobspecs", response_model=JobSpecs)
def job_specs(me: Authed, service: Served, group: str, name: str) -> dict[str, Any]:
    flow = find_flow(service, group, name)
    groups = service.owner_groups(flow.config.get("owner"))
    plan = service.checks.compile(flow.config, group, name, groups=groups, file=flow.origin == "file")
    described: dict[str, Any] = hide_secrets(plan.describe())
    return described


@router.get("/{group}/{name}/history", response_model=list[FlowVersion])
def history(
    me: Authed,
    service: Served,
    response: Response,
    group: str,
    name: str,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_PAGE)] = HISTORY_PAGE,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """The flow's versions, oldest first, a page at a time (``X-Total-Count``: how many in all)."""
    check_names(group, name)
    versions = service.flows.history(group, name)
    response.headers["X-Total-Count"] = str(len(versions))
    return [{**hide_secrets(f.describe()), "action": f.action} for f in versions[offset : offset + limit]]


@router.get("/{group}/{name}/schedule", response_model=FlowSchedule)
def schedule(me: Authed, service: Served, group: str, name: str) -> dict[str, Any]:
    if service.scheduler is None:
        raise NotFound("this instance does not schedule (it was started with --no-scheduler)")
    return service.scheduler.describe(find_flow(service, group, name))


# -- the steps ----------------------------------------------------------------------------------


def _save(
    service: Service, me: User, group: str, name: str, body: dict[str, Any], *, action: Action
) -> tuple[StoredFlow, FlowPlan]:
    """Check ``body`` as the flow's next version, then store it: a new group is made first,
    owned by ``me`` (so of two users racing to make one, the second is refused)."""
    config = check_shape(body, group, name)
    existing = service.flows.files.get(group, name)
    if existing is not None:
        raise Conflict(
            f"flow {group}/{name} is defined by the file {existing.file}: change the file, or use another name"
        )
    service.groups.check_change(me, group)
    previous = service.flows.get(group, name)
    if action == "update" and previous is None:
        raise NotFound(f"no flow {group}/{name}")
    owner = config["owner"] = _owner(me, config, previous)
    plan = service.checks.compile(
        seal_secrets(config, previous.config if previous else None), group, name, groups=service.owner_groups(owner)
    )
    if action == "create":
        _claim(service, me, group)
    stored = service.flows.save(
        group,
        name,
        None,
        by=me.name,
        action=action,
        seal=lambda before: seal_secrets(config, before),  # type: ignore[arg-type]
    )
    return stored, plan


def _claim(service: Service, me: User, group: str) -> None:
    """Make ``group`` owned by ``me`` unless it exists (then its owners decide); a group of flow
    files takes new flows from admins only."""
    if service.flows.files.has_group(group) and not me.admin:
        raise Forbidden(f"flow group `{group}` has flow files (jobs/flows/{group}/): only admins add flows to it")
    service.groups.claim(group, me)
    service.groups.check_change(me, group)


def _owner(me: User, config: dict[str, Any], previous: StoredFlow | None) -> str:
    """Whom a flow's new version runs as: the ``owner`` it names, else the one it has (a version
    that leaves ``owner`` out never re-owns the flow), else, for a new flow, ``me``. Only an
    admin makes a flow run as another user: leaving out an owner who is not ``me`` is such a
    choice, refused for anyone else (who names itself to take the flow over)."""
    kept = previous.config.get("owner") if previous is not None else None
    owner = config.get("owner") or kept or me.name
    if owner == me.name or me.admin:
        return str(owner)
    if "owner" not in config:
        raise Forbidden(
            f"the flow runs as `{owner}`, which a version without `owner` keeps, "
            f'and user `{me.name}` may not make a flow run as another user: send "owner": "{me.name}" to take '
            "it over (admins may keep any owner)",
            key="owner",
        )
    raise Forbidden(
        f"a flow runs as its owner: user `{me.name}` may name only itself (admins may name anyone)", key="owner"
    )


def _run_if_asked(service: Service, me: User, stored: StoredFlow, plan: FlowPlan) -> str | None:
    if not plan.conf.run_immediately:
        return None
    return str(start(service, me, stored, trigger="runImmediately")["execution_id"])


def _summary(flow: StoredFlow) -> dict[str, Any]:
    """A flow as a list shows it: its key, version and :data:`SUMMARY` keys (the description cut
    at :data:`LISTED_DESCRIPTION` characters); ``GET /flowconfigs/{g}/{n}`` has the rest."""
    whole = flow.describe()
    found = {k: whole[k] for k in SUMMARY if k in whole}
    text = found.get("description")
    if isinstance(text, str) and len(text) > LISTED_DESCRIPTION:
        found["description"] = text[:LISTED_DESCRIPTION] + "..."
    keys = ("flowGroup", "flowName", "version", "origin", "changedBy", "changedAt", "file")
    summary: dict[str, Any] = hide_secrets({**{k: whole[k] for k in keys if k in whole}, **found})
    return summary


def _answer(stored: StoredFlow, execution: str | None) -> dict[str, Any]:
    found = hide_secrets(stored.describe())
    return {**found, "flowExecutionId": execution} if execution else found
