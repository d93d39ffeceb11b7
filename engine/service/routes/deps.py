"""What every route of the API shares: the service, the authenticated user, query parameters checked
against the ones a call takes, and a body read as JSON of one meaning before its model checks it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from engine.service.checks import check_names
from engine.service.errors import Invalid, NotFound, ServiceError, TimedOut, Unauthenticated
from engine.service.flowstore import StoredFlow
from engine.service.intake import parse_json
from engine.service.page import COOKIE
from engine.service.service import Service
from engine.service.users import User

PAGE = 100
"""Flows a list answers by default (``limit``), at most :data:`MAX_PAGE`."""
MAX_PAGE = 500


def _service(request: Request) -> Service:
    found: Service = request.app.state.service
    return found


Served = Annotated[Service, Depends(_service)]
"""A handler's argument: what the API serves."""


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

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Offset = Annotated[int, Query(ge=0)]


def known_parameters(request: Request) -> None:
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


def find_flow(service: Service, group: str, name: str) -> StoredFlow:
    """The flow ``group``/``name`` names (its names checked before any lookup), or :class:`NotFound`."""
    check_names(group, name)
    found = service.flows.get(group, name)
    if found is None:
        raise NotFound(f"no flow {group}/{name}")
    return found


class JsonRequest(Request):
    """A request whose body is JSON of one meaning (:func:`~engine.service.intake.parse_json`)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                raw = await self.body()
            except ClientDisconnect:  # (the deadline closed it: see engine.service.deadline)
                raise TimedOut("the client left before its request was whole") from None
            self._json = parse_json(raw)
        return self._json


JSON = (b"content-type", b"application/json")


class ServiceRoute(APIRoute):
    """A route of the API. A body is read as JSON whatever its content type says (``curl -d`` says a
    form) and before FastAPI validates it against the route's model, so that a key given twice,
    ``NaN`` or a body cut short is refused as the service refuses it (not as FastAPI's 400). An
    answer holds the keys the handler gave: its model documents and checks them, adding none."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        if self.body_field is None:
            return handle

        async def read_then_handle(request: Request) -> Response:
            scope = request.scope
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k != JSON[0]] + [JSON]
            body = JsonRequest(scope, request.receive)
            try:
                await body.json()
            except ServiceError:  # the call's own checks come first, as when the body was a dependency
                known_parameters(body)
                await run_in_threadpool(_user, body)
                raise
            return await handle(body)

        return read_then_handle
