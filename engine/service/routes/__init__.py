"""The API's routes, one router per resource; :func:`engine.service.app.create_app` includes them."""

from __future__ import annotations

from fastapi import APIRouter

from engine.service.routes import flowconfigs, flowexecutions, flowgroups, flowstatuses, meta, pages

ROUTERS: tuple[APIRouter, ...] = (
    meta.router,
    flowconfigs.router,
    flowgroups.router,
    flowexecutions.router,
    flowstatuses.router,
    pages.router,
)

__all__ = ["ROUTERS"]
