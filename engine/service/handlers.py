"""How the API refuses: one JSON object, ``{"detail": ..., "key": ...}``, with the status of
:mod:`engine.service.errors`. A body its model refuses is said as the service's own checks say it
(``a FlowConfig needs `flowName```, ``unknown key `frob```), naming the body's key path as the
compiler does (``destinations[0]``); a malformed query parameter or path segment names itself."""

from __future__ import annotations

import logging
import typing
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from engine.service.errors import ServiceError
from engine.service.intake import CLOSE
from engine.service.routes.bodies import RequestBody

log = logging.getLogger(__name__)

PARTS = {"query": "query parameter ", "path": "path segment ", "header": "header ", "body": ""}
"""Where FastAPI found a malformed value, as a refusal names it."""


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _refused)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, _left)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _failed)
    app.add_exception_handler(RequestValidationError, _malformed)  # type: ignore[arg-type]


def _refused(request: Request, exc: ServiceError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    if exc.status in (408, 413):  # the body is not read to its end: the connection ends with the answer
        headers = CLOSE
    return JSONResponse({"detail": exc.message, "key": exc.key}, status_code=exc.status, headers=headers)


def _left(request: Request, exc: ClientDisconnect) -> JSONResponse:
    """The client left (or its request timed out) while a handler read the body: no one hears this."""
    return JSONResponse({"detail": "the client left before its request was whole", "key": None}, status_code=408)


def _failed(request: Request, exc: Exception) -> JSONResponse:
    """A failure of the service's own: what it was stays in the log (it may name the
    server's paths), the answer names the log entry."""
    incident = uuid.uuid4().hex[:12]
    log.exception("%s %s failed (incident %s)", request.method, request.url.path, incident)
    detail = f"the service failed ({type(exc).__name__}); its log says why under incident {incident}"
    return JSONResponse({"detail": detail, "key": None}, status_code=500)


def _malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
    """The first thing FastAPI found malformed, as a 422 naming its key."""
    first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    loc = list(first.get("loc", ()))
    origin = str(loc[0]) if loc and loc[0] in PARTS else ""
    where = _key_path(loc[1:] if origin else loc)
    message = str(first.get("msg", "invalid request"))
    if origin == "body":
        detail = _said_of_body(first, where, _body_model(request))
    else:
        detail = f"{PARTS.get(origin, '')}`{where}`: {message}" if where else message
    return JSONResponse({"detail": detail, "key": where or None}, status_code=422)


def _key_path(loc: Sequence[Any]) -> str:
    """A location as the body's key path: ``destinations[0]``, ``properties.x``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _said_of_body(error: dict[str, Any], where: str, model: type[RequestBody]) -> str:
    """What a body's model refused, said as the service's own checks say it."""
    kind, given, ctx = error.get("type"), error.get("input"), error.get("ctx") or {}
    if not where and kind in ("missing", "model_type", "model_attributes_type", "dict_type"):
        return model.asked
    if kind == "missing":
        return f"{model.what} needs `{where}`"
    if kind == "extra_forbidden":
        return f"unknown key `{where}` (known: {', '.join(model.model_fields)})"
    if kind == "string_too_long" and isinstance(given, str):
        most = ctx.get("max_length")
        return f"`{given[:40]}...` ({len(given)} characters): a {where} has at most {most} characters"
    if kind == "string_pattern_mismatch":
        return f"{where} `{given}`: use letters, digits, `_` and `-` (not first)"
    if kind == "too_long":
        return f"`{where}` has at most {ctx.get('max_length')} entries ({ctx.get('actual_length')} given)"
    return f"`{where}`: {error.get('msg', 'invalid')}" if where else str(error.get("msg", "invalid request"))


def _body_model(request: Request) -> type[RequestBody]:
    """The model of the body the request's route takes (:class:`RequestBody` if none is found)."""
    endpoint = getattr(request.scope.get("route"), "endpoint", None)
    hints = typing.get_type_hints(endpoint) if endpoint is not None else {}
    for hint in hints.values():
        if isinstance(hint, type) and issubclass(hint, RequestBody):
            return hint
    return RequestBody
