"""A deadline on each HTTP request: its head and body must arrive within ``--request-timeout``
seconds of its first byte (of the connection's opening, for the first).

uvicorn times out only an idle keep-alive connection, and only after a response: a client that
opens a connection and sends nothing, half a request line, or half a body holds the connection
(and, for a body, a worker thread's request) for as long as it likes. This protocol is uvicorn's
own HTTP/1.1 one (h11) with a timer: when it fires before the request is whole, the client gets
a ``408 Request Timeout`` (when no answer has begun) and the connection is closed; the handler
waiting for the body is told the client left.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

REQUEST_SECONDS = 30.0
"""The default deadline (``serve.sh --request-timeout``)."""
TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)
_ARRIVING = (h11.IDLE, h11.SEND_BODY)
"""The client's states while a request is on its way (h11's, seen from the server)."""


def deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's ``http=`` protocol class, with a deadline of ``seconds`` per request."""
    return type("DeadlineProtocol", (DeadlineProtocol,), {"request_seconds": seconds})


class DeadlineProtocol(H11Protocol):
    request_seconds = REQUEST_SECONDS
    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._timer is None and self.conn.their_state is h11.IDLE:  # a new request begins
            self._arm()
        super().data_received(data)
        if self.conn.their_state not in _ARRIVING:  # the request is whole (or the connection is done)
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._timer = self.loop.call_later(self.request_seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.conn.their_state not in _ARRIVING:
            return
        answered = self.cycle is not None and self.cycle.response_started and self.conn.their_state is h11.SEND_BODY
        if not answered and (self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]):
            body = b'{"detail": "the request did not arrive whole within %.0f s", "key": null}' % self.request_seconds
            self.transport.write(TIMED_OUT % (len(body), body))
            log.info("a request from %s did not arrive whole within %.0f s", self.client, self.request_seconds)
        self.transport.close()
