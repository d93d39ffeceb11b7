"""The flow service's errors: each is an HTTP status and one readable reason."""

from __future__ import annotations

from engine.errors import EngineError


class ServiceError(EngineError):
    """A request the service refuses; ``status`` is the HTTP status it answers with."""

    status = 400

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        """The dotted key path of the request body the refusal is about, when there is one."""


class Unauthenticated(ServiceError):
    status = 401


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class TimedOut(ServiceError):
    """The client did not send its request whole in time, or left before it had."""

    status = 408


class Invalid(ServiceError):
    status = 422


class Unavailable(ServiceError):
    """The store cannot be reached or written: the request may be retried."""

    status = 503
    transient = True
