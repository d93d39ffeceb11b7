"""The flow service's HTTP API (FastAPI): FlowConfigs, their versions and compiled jobs, flow groups'
owners, and executions. JSON in and out; every call but ``/healthz`` carries
``Authorization: Bearer <token>``. A refusal is one JSON object, ``{"detail": ..., "key": ...}``,
with the status of :mod:`engine.service.errors`; ``key`` names the body's key or the query
parameter. A body is at most :data:`~engine.service.intake.MAX_BODY_BYTES` and of one meaning
(:mod:`engine.service.intake`), a query parameter a call does not take is refused, and a list
answers each flow's summary, a page at a time.

Each resource is a router of :mod:`engine.service.routes`, its bodies and answers pydantic models
(so ``/openapi.json`` documents them); handlers are plain functions: FastAPI runs them on its
thread pool, where the store's blocking reads (delta-rs) belong.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from engine import __version__
from engine.service.handlers import install_error_handlers
from engine.service.intake import BodyLimit
from engine.service.routes import ROUTERS
from engine.service.routes.deps import known_parameters
from engine.service.service import Service

__all__ = ["Service", "create_app"]


def create_app(service: Service) -> FastAPI:
    """The API over ``service``: its routers, the body limit, and its refusals."""
    app = FastAPI(
        title="engine flow service",
        version=__version__,
        lifespan=_lifespan,
        dependencies=[Depends(known_parameters)],
    )
    app.state.service = service
    app.add_middleware(BodyLimit)
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    scheduler = app.state.service.scheduler
    if scheduler is not None:  # a graceful stop gives the leader lease back
        await run_in_threadpool(scheduler.stop)
