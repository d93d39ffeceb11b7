"""What the flow service takes in before a handler reads it: a body of at most
:data:`MAX_BODY_BYTES` (a 413, counted as it arrives, so a large body is never read whole), and
JSON of one meaning only: a key given twice in one object, or ``NaN``/``Infinity`` (which
Python's parser takes but JSON has not), is refused naming its key (422).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.service.errors import Invalid, ServiceError

MAX_BODY_BYTES = 64 * 1024
"""A request's body: the largest FlowConfig (its fields' limits, :mod:`engine.flow.limits`, and a
few KB of properties) fits many times over."""
CLOSE = {"Connection": "close"}
"""Sent with a 413: the rest of the body is not read, so the connection cannot carry another request."""


class TooLarge(ServiceError):
    status = 413


def too_large(most: int, given: int | None = None) -> TooLarge:
    size = f" ({given} bytes)" if given is not None else ""
    return TooLarge(f"the request body{size} is too large: at most {most} bytes")


class BodyLimit:
    """ASGI middleware: refuse a request whose declared ``Content-Length`` is over ``most`` at once,
    and one whose body grows past it while a handler reads it (:class:`TooLarge`, answered by the
    app's handler of service errors)."""

    def __init__(self, app: ASGIApp, most: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.most = most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.most:
            refusal = too_large(self.most, declared)
            answer = JSONResponse({"detail": refusal.message, "key": None}, status_code=413, headers=CLOSE)
            await answer(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.most:
                    raise too_large(self.most)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def parse_json(raw: bytes) -> Any:
    """``raw`` as JSON, or :class:`Invalid` naming the first key given twice or holding a value
    JSON has not (``NaN``, ``Infinity``)."""
    try:
        parsed = json.loads(raw or b"null", object_pairs_hook=_Pairs, parse_constant=_NotJson)
        return _plain(parsed, "")
    except RecursionError:
        raise Invalid("the body is nested too deeply") from None
    except ValueError as exc:
        raise Invalid(f"the body is not JSON: {exc}") from None


class _Pairs(list[tuple[str, Any]]):
    """An object as the parser read it, every pair kept (a dict would keep the last of a repeated key)."""


class _NotJson(str):
    """``NaN``, ``Infinity`` or ``-Infinity`` where the parser met it."""


def _plain(value: Any, key: str) -> Any:
    if isinstance(value, _Pairs):
        out: dict[str, Any] = {}
        for k, v in value:
            at = f"{key}.{k}" if key else k
            if k in out:
                raise Invalid(f"`{k}` is given twice in one object: give each key once", key=at)
            out[k] = _plain(v, at)
        return out
    if isinstance(value, list):
        return [_plain(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, _NotJson):
        raise Invalid(f"`{value}` is not a JSON number", key=key or None)
    return value
