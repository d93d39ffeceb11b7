"""The service itself: whether it is up (``/healthz``, no token), its metrics, and who is asking."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from engine import __version__
from engine.service.metrics import CONTENT_TYPE, exposition
from engine.service.routes.answers import Health, Me
from engine.service.routes.deps import Authed, Served, ServiceRoute

router = APIRouter(route_class=ServiceRoute, tags=["service"])


@router.get("/healthz", response_model=Health)
def healthz(service: Served) -> dict[str, Any]:
    leader = service.scheduler is not None and service.scheduler.leader
    return {"status": "ok", "version": __version__, "leader": leader}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(me: Authed, service: Served) -> Response:
    return Response(exposition(service), media_type=CONTENT_TYPE)


@router.get("/whoami", response_model=Me)
def whoami(me: Authed) -> dict[str, Any]:
    return {"name": me.name, "groups": list(me.groups), "admin": me.admin}
