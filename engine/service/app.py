"""The flow service's HTTP API (FastAPI): FlowConfigs, their versions and compiled jobs, flow groups'
owners, and executions. JSON in and out; every call but ``/healthz`` carries
``Authorization: Bearer <token>``. A refusal is one JSON object, ``{"detail": ..., "key": ...}``,
with the status of :mod:`engine.service.errors`; ``key`` names the body's key or the query
parameter. A body is at most :data:`~engine.service.intake.MAX_BODY_BYTES` and of one meaning
(:mod:`engine.service.intake`), a query parameter a call does not take is refused, and a list
answers each flow's summary, a page at a time.

Handlers are plain functions: FastAPI runs them on its thread pool, where the store's blocking
reads (delta-rs) belong.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from engine import __version__
from engine.flow import FlowPlan
from engine.flow.limits import MAX_OWNER
from engine.service.access import FlowGroups
from engine.service.checks import (
    FlowChecks,
    check_group,
    check_name,
    check_names,
    check_shape,
    hide_secrets,
    seal_secrets,
)
from engine.service.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError, TimedOut, Unauthenticated
from engine.service.executions import Executions
from engine.service.flowstore import Action, FlowStore, StoredFlow
from engine.service.intake import CLOSE, BodyLimit, parse_json
from engine.service.metrics import CONTENT_TYPE, exposition
from engine.service.page import COOKIE, install_pages
from engine.service.scheduler import Scheduler
from engine.service.users import User, Users

log = logging.getLogger(__name__)

PAGE = 100
"""Flows a list answers by default (``limit``), at most :data:`MAX_PAGE`."""
MAX_PAGE = 500
HISTORY_PAGE = 20
"""Versions a flow's history answers by default, at most :data:`MAX_HISTORY_PAGE` (each is a whole FlowConfig)."""
MAX_HISTORY_PAGE = 100
MAX_STATUSES = 100
"""Executions ``/flowstatuses`` answers at most."""
LISTED_DESCRIPTION = 200
"""The characters of a description a list shows (the flow itself has it whole)."""
SUMMARY = ("owner", "description", "schedule", "source", "destinations", "templateUris", "runImmediately", "catchup")
"""The FlowConfig keys a list shows of each flow, besides its key and version (not its properties or datasets)."""
MAX_OWNERS = 64
"""Owners of one flow group."""
EXECUTION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
PARTS = {"query": "query parameter ", "path": "path segment ", "header": "header ", "body": ""}
"""Where FastAPI found a malformed value, as a refusal names it."""


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


def _user(request: Request) -> User:
    """The user the request's bearer token belongs to; :class:`Unauthenticated` otherwise."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header and request.method == "GET":  # the status page's cookie: reading only
        scheme, token = "bearer", request.cookies.get(COOKIE, "")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("send `Authorization: Bearer <token>` (`serve.sh users add` makes users and tokens)")
    found = request.app.state.service.users.authenticate(token.strip())
    if found is None:
        raise Unauthenticated("this token is unknown, was replaced, or its user was removed")
    return found  # type: ignore[no-any-return]


Authed = Annotated[User, Depends(_user)]
"""A handler's argument: the authenticated user."""


async def _json_body(request: Request) -> Any:
    """The request's body as JSON, whatever its content type says (``curl -d`` says a form)."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # (the deadline closed it: see engine.service.deadline)
        raise TimedOut("the client left before its request was whole") from None
    return parse_json(raw)


JsonBody = Annotated[Any, Depends(_json_body)]


def _known_parameters(request: Request) -> None:
    """Refuse a query parameter the call does not take: a misspelt one would be ignored."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    known = set(_query_names(dependant))
    for name in request.query_params:
        if name not in known:
            takes = f"it takes {', '.join(f'`{k}`' for k in sorted(known))}" if known else "it takes none"
            raise Invalid(f"`{name}` is not a query parameter of this call ({takes})", key=name)


def _query_names(dependant: Any) -> Iterator[str]:
    for field in dependant.query_params:
        yield field.alias or field.name
    for inner in dependant.dependencies:
        yield from _query_names(inner)


Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Offset = Annotated[int, Query(ge=0)]


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if service.scheduler is not None:  # a graceful stop gives the leader lease back
            await run_in_threadpool(service.scheduler.stop)

    app = FastAPI(
        title="engine flow service",
        version=__version__,
        lifespan=lifespan,
        dependencies=[Depends(_known_parameters)],
    )
    app.state.service = service
    app.add_middleware(BodyLimit)
    _errors(app)
    install_pages(app, service)

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        leader = service.scheduler is not None and service.scheduler.leader
        return {"status": "ok", "version": __version__, "leader": leader}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics(me: Authed) -> Response:
        return Response(exposition(service), media_type=CONTENT_TYPE)

    @app.get("/whoami")
    def whoami(me: Authed) -> dict[str, Any]:
        return {"name": me.name, "groups": list(me.groups), "admin": me.admin}

    # -- flow configs ---------------------------------------------------------------------------

    @app.post("/flowconfigs", status_code=201)
    def create_flow(me: Authed, body: JsonBody) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise Invalid("a FlowConfig is a JSON object")
        group, name = body.get("flowGroup"), body.get("flowName")
        for key, value in (("flowGroup", group), ("flowName", name)):
            if not isinstance(value, str) or not value:
                raise Invalid(f"a FlowConfig needs `{key}`", key=key)
        assert isinstance(group, str) and isinstance(name, str)
        stored, plan = _save(me, group, name, body, action="create")
        return _answer(stored, _run_if_asked(me, stored, plan))

    @app.get("/flowconfigs")
    def list_flows(
        me: Authed, response: Response, flowGroup: str | None = None, limit: Limit = PAGE, offset: Offset = 0
    ) -> list[dict[str, Any]]:
        """Each flow's summary (:data:`SUMMARY`), by group and name; ``X-Total-Count`` says how
        many there are in all."""
        if flowGroup is not None:
            check_group(flowGroup)
        flows = service.flows.listed(flowGroup)
        response.headers["X-Total-Count"] = str(len(flows))
        return [_summary(f) for f in flows[offset : offset + limit]]

    @app.get("/flowconfigs/{group}/{name}")
    def get_flow(me: Authed, group: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = hide_secrets(_flow(group, name).describe())
        return found

    @app.put("/flowconfigs/{group}/{name}")
    def update_flow(me: Authed, group: str, name: str, body: JsonBody) -> dict[str, Any]:
        stored, plan = _save(me, group, name, body, action="update")
        return _answer(stored, _run_if_asked(me, stored, plan))

    @app.delete("/flowconfigs/{group}/{name}")
    def delete_flow(me: Authed, group: str, name: str) -> dict[str, Any]:
        _flow(group, name)
        service.groups.check_change(me, group)
        stored = service.flows.save(group, name, None, by=me.name, action="delete")
        return {"flowGroup": group, "flowName": name, "version": stored.version, "deleted": True}

    @app.get("/flowconfigs/{group}/{name}/jobspecs")
    def job_specs(me: Authed, group: str, name: str) -> dict[str, Any]:
        flow = _flow(group, name)
        groups = service.owner_groups(flow.config.get("owner"))
        plan = service.checks.compile(flow.config, group, name, groups=groups, file=flow.origin == "file")
        described: dict[str, Any] = hide_secrets(plan.describe())
        return described

    @app.get("/flowconfigs/{group}/{name}/history")
    def history(
        me: Authed,
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

    @app.get("/flowconfigs/{group}/{name}/schedule")
    def schedule(me: Authed, group: str, name: str) -> dict[str, Any]:
        if service.scheduler is None:
            raise NotFound("this instance does not schedule (it was started with --no-scheduler)")
        return service.scheduler.describe(_flow(group, name))

    # -- flow groups ----------------------------------------------------------------------------

    @app.get("/flowgroups/{group}")
    def get_group(me: Authed, group: str) -> dict[str, Any]:
        check_group(group)
        return service.groups.describe(group)

    @app.put("/flowgroups/{group}")
    def set_group(me: Authed, group: str, body: JsonBody) -> dict[str, Any]:
        check_group(group)
        _only_keys(body, ("owners",), 'give the owners: {"owners": ["alice", "group:analysts"]}')
        owners = body.get("owners")
        if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
            raise Invalid("give the group's owners as a list of user names and group:<name>", key="owners")
        if len(owners) > MAX_OWNERS:
            raise Invalid(f"a flow group has at most {MAX_OWNERS} owners ({len(owners)} given)", key="owners")
        for i, owner in enumerate(owners):
            check_name(owner.removeprefix("group:"), f"owners[{i}]", MAX_OWNER)
        if service.groups.owners(group) is None and not me.admin:
            raise Forbidden(
                f"flow group `{group}` has no owners yet: it is made by creating a flow in it, or by an admin"
            )
        service.groups.check_change(me, group)
        service.groups.set_owners(group, owners, by=me)
        return service.groups.describe(group)

    # -- executions -----------------------------------------------------------------------------

    @app.post("/flowexecutions", status_code=201)
    def run_flow(me: Authed, body: JsonBody) -> dict[str, Any]:
        asked = 'give the flow to run: {"flowGroup": ..., "flowName": ...}'
        _only_keys(body, ("flowGroup", "flowName"), asked)
        for key in ("flowGroup", "flowName"):
            if not isinstance(body.get(key), str):
                raise Invalid(asked, key=key)
        flow = _flow(body["flowGroup"], body["flowName"])
        row = _start(me, flow, trigger="api")
        return {"flowExecutionId": row["execution_id"], **service.executions.describe(row)}

    @app.get("/flowexecutions/{execution}")
    def get_execution(me: Authed, execution: str) -> dict[str, Any]:
        return service.executions.describe(service.executions.get(_execution(execution)))

    @app.delete("/flowexecutions/{execution}", status_code=202)
    def cancel_execution(me: Authed, execution: str) -> dict[str, Any]:
        row = service.executions.get(_execution(execution))
        flow = service.flows.get(row["flow_group"], row["flow_name"])
        service.groups.check_run(me, row["flow_group"], flow.config.get("owner") if flow else None)
        service.executions.cancel(execution, by=me.name)
        return {**service.executions.describe(row), "cancelRequested": True}

    @app.get("/flowexecutions/{execution}/output", response_class=PlainTextResponse)
    def execution_output(me: Authed, execution: str) -> str:
        return service.executions.output(_execution(execution))

    @app.get("/flowstatuses/{group}/{name}")
    def flow_statuses(
        me: Authed, group: str, name: str, limit: Annotated[int, Query(ge=1, le=MAX_STATUSES)] = 20
    ) -> list[dict[str, Any]]:
        check_names(group, name)
        return [service.executions.describe(r) for r in service.executions.of_flow(group, name, limit=limit)]

    # -- the steps ------------------------------------------------------------------------------

    def _flow(group: str, name: str) -> StoredFlow:
        check_names(group, name)
        found = service.flows.get(group, name)
        if found is None:
            raise NotFound(f"no flow {group}/{name}")
        return found

    def _save(me: User, group: str, name: str, body: Any, *, action: Action) -> tuple[StoredFlow, FlowPlan]:
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
            if service.flows.files.has_group(group) and not me.admin:
                raise Forbidden(
                    f"flow group `{group}` has flow files (jobs/flows/{group}/): only admins add flows to it"
                )
            service.groups.claim(group, me)  # made now unless it exists; then its owners decide
            service.groups.check_change(me, group)
        stored = service.flows.save(
            group,
            name,
            None,
            by=me.name,
            action=action,
            seal=lambda before: seal_secrets(config, before),  # type: ignore[arg-type]
        )
        return stored, plan

    def _start(me: User, flow: StoredFlow, *, trigger: str) -> dict[str, Any]:
        service.groups.check_run(me, flow.group, flow.config.get("owner"))
        return service.start(flow, by=me.name, trigger=trigger)

    def _run_if_asked(me: User, stored: StoredFlow, plan: FlowPlan) -> str | None:
        if not plan.conf.run_immediately:
            return None
        return str(_start(me, stored, trigger="runImmediately")["execution_id"])

    return app


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


def _only_keys(body: Any, keys: tuple[str, ...], asked: str) -> None:
    """``body`` is an object of ``keys`` only."""
    if not isinstance(body, dict):
        raise Invalid(asked)
    for key in body:
        if key not in keys:
            raise Invalid(f"unknown key `{key}` (known: {', '.join(keys)})", key=key)


def _execution(execution: str) -> str:
    if not EXECUTION_ID.fullmatch(execution):
        raise Invalid(f"`{execution[:80]}` is not an execution's id", key="execution")
    return execution


def _answer(stored: StoredFlow, execution: str | None) -> dict[str, Any]:
    found = hide_secrets(stored.describe())
    return {**found, "flowExecutionId": execution} if execution else found


def _errors(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    def refused(request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        if exc.status in (408, 413):  # the body is not read to its end: the connection ends with the answer
            headers = CLOSE
        return JSONResponse({"detail": exc.message, "key": exc.key}, status_code=exc.status, headers=headers)

    @app.exception_handler(ClientDisconnect)
    def left(request: Request, exc: ClientDisconnect) -> JSONResponse:
        """The client left (or its request timed out) while a handler read the body: no one hears this."""
        return JSONResponse({"detail": "the client left before its request was whole", "key": None}, status_code=408)

    @app.exception_handler(Exception)
    def failed(request: Request, exc: Exception) -> JSONResponse:
        """A failure of the service's own: what it was stays in the log (it may name the
        server's paths), the answer names the log entry."""
        incident = uuid.uuid4().hex[:12]
        log.exception("%s %s failed (incident %s)", request.method, request.url.path, incident)
        detail = f"the service failed ({type(exc).__name__}); its log says why under incident {incident}"
        return JSONResponse({"detail": detail, "key": None}, status_code=500)

    @app.exception_handler(RequestValidationError)
    def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ())]
        origin = loc[0] if loc and loc[0] in PARTS else ""
        where = ".".join(loc[1:] if origin else loc)
        message = str(first.get("msg", "invalid request"))
        kind = PARTS.get(origin, "")
        return JSONResponse(
            {"detail": f"{kind}`{where}`: {message}" if where else message, "key": where or None}, status_code=422
        )
