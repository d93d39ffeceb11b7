"""The flow service's HTTP API (FastAPI): FlowConfigs, their versions and compiled jobs, flow groups'
owners, and executions. JSON in and out; every call but ``/healthz`` carries
``Authorization: Bearer <token>``. A refusal is one JSON object, ``{"detail": ..., "key": ...}``,
with the status of :mod:`engine.service.errors`.

Handlers are plain functions: FastAPI runs them on its thread pool, where the store's blocking
reads (delta-rs) belong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from engine import __version__
from engine.flow import FlowPlan
from engine.service.access import FlowGroups
from engine.service.checks import FlowChecks, check_names, check_shape, hide_secrets, seal_secrets
from engine.service.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError, Unauthenticated
from engine.service.executions import Executions
from engine.service.flowstore import Action, FlowStore, StoredFlow
from engine.service.metrics import CONTENT_TYPE, exposition
from engine.service.page import COOKIE, install_pages
from engine.service.scheduler import Scheduler
from engine.service.users import User, Users

log = logging.getLogger(__name__)


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
        """Start an execution of ``flow`` as its owner, whose groups the template packs see."""
        groups = self.owner_groups(flow.config.get("owner"))
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
    raw = await request.body()
    try:
        return json.loads(raw or b"null")
    except RecursionError:
        raise Invalid("the body is nested too deeply") from None
    except ValueError as exc:
        raise Invalid(f"the body is not JSON: {exc}") from None


JsonBody = Annotated[Any, Depends(_json_body)]


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if service.scheduler is not None:  # a graceful stop gives the leader lease back
            await run_in_threadpool(service.scheduler.stop)

    app = FastAPI(title="engine flow service", version=__version__, lifespan=lifespan)
    app.state.service = service
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
    def list_flows(me: Authed, flowGroup: str | None = None) -> list[dict[str, Any]]:
        return [hide_secrets(f.describe()) for f in service.flows.listed(flowGroup)]

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
        plan = service.checks.compile(flow.config, group, name, groups=service.owner_groups(flow.config.get("owner")))
        described: dict[str, Any] = hide_secrets(plan.describe())
        return described

    @app.get("/flowconfigs/{group}/{name}/history")
    def history(me: Authed, group: str, name: str) -> list[dict[str, Any]]:
        check_names(group, name)
        return [{**hide_secrets(f.describe()), "action": f.action} for f in service.flows.history(group, name)]

    @app.get("/flowconfigs/{group}/{name}/schedule")
    def schedule(me: Authed, group: str, name: str) -> dict[str, Any]:
        if service.scheduler is None:
            raise NotFound("this instance does not schedule (it was started with --no-scheduler)")
        return service.scheduler.describe(_flow(group, name))

    # -- flow groups ----------------------------------------------------------------------------

    @app.get("/flowgroups/{group}")
    def get_group(me: Authed, group: str) -> dict[str, Any]:
        return service.groups.describe(group)

    @app.put("/flowgroups/{group}")
    def set_group(me: Authed, group: str, body: JsonBody) -> dict[str, Any]:
        owners = body.get("owners") if isinstance(body, dict) else None
        if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
            raise Invalid("give the group's owners as a list of user names and group:<name>", key="owners")
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
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("flowGroup"), str)
            or not isinstance(body.get("flowName"), str)
        ):
            raise Invalid('give the flow to run: {"flowGroup": ..., "flowName": ...}')
        flow = _flow(body["flowGroup"], body["flowName"])
        row = _start(me, flow, trigger="api")
        return {"flowExecutionId": row["execution_id"], **service.executions.describe(row)}

    @app.get("/flowexecutions/{execution}")
    def get_execution(me: Authed, execution: str) -> dict[str, Any]:
        return service.executions.describe(service.executions.get(execution))

    @app.delete("/flowexecutions/{execution}", status_code=202)
    def cancel_execution(me: Authed, execution: str) -> dict[str, Any]:
        row = service.executions.get(execution)
        flow = service.flows.get(row["flow_group"], row["flow_name"])
        service.groups.check_run(me, row["flow_group"], flow.config.get("owner") if flow else None)
        service.executions.cancel(execution, by=me.name)
        return {**service.executions.describe(row), "cancelRequested": True}

    @app.get("/flowexecutions/{execution}/output", response_class=PlainTextResponse)
    def execution_output(me: Authed, execution: str) -> str:
        return service.executions.output(execution)

    @app.get("/flowstatuses/{group}/{name}")
    def flow_statuses(me: Authed, group: str, name: str, limit: int = 20) -> list[dict[str, Any]]:
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
        owner = config.setdefault("owner", me.name)
        if owner != me.name and not me.admin:
            raise Forbidden(
                f"a flow runs as its owner: user `{me.name}` may name only itself (admins may name anyone)", key="owner"
            )
        service.groups.check_change(me, group)
        previous = service.flows.get(group, name)
        if action == "update" and previous is None:
            raise NotFound(f"no flow {group}/{name}")
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


def _answer(stored: StoredFlow, execution: str | None) -> dict[str, Any]:
    found = hide_secrets(stored.describe())
    return {**found, "flowExecutionId": execution} if execution else found


def _errors(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    def refused(request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": exc.message, "key": exc.key}, status_code=exc.status, headers=headers)

    @app.exception_handler(Exception)
    def failed(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        detail = f"the service failed: {type(exc).__name__}: {exc}"
        return JSONResponse({"detail": detail, "key": None}, status_code=500)

    @app.exception_handler(RequestValidationError)
    def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        message = str(first.get("msg", "invalid request"))
        return JSONResponse(
            {"detail": f"{message}" + (f" at {where}" if where else ""), "key": where or None}, status_code=422
        )
