"""What a database's refusal means, in one line that says the cause.

A JDBC read or write that fails reaches Python as py4j's ``Py4JJavaError`` ("An error occurred
while calling o219.load."): the cause is in the Java exception's chain (the driver's
``SQLException``, and under it, for a connection, the ``java.net`` exception). :func:`database_error`
reads that chain and gives:

- :class:`~engine.errors.UnreachableError` (exit 1) when the database cannot be reached or refuses
  the login (SQLSTATE class ``08`` or ``28``, a ``java.net`` cause): the config may be right, and
  the same run may succeed once the database is back;
- :class:`~engine.errors.ConfigError` (exit 2) when the database says the table or the query is
  wrong (SQLSTATE class ``42``: no such table, a syntax error, no privilege on it);
- :class:`~engine.errors.JobFailedError` otherwise, with the driver's message.

The URL is shown without credentials (``user:password@``, ``?password=...``), and the password
never: a driver that quotes it has it masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError, EngineError, JobFailedError, UnreachableError

__all__ = ["database_error", "shown_url"]

_MAX_CHAIN = 12
_NET_CAUSES = {
    "java.net.UnknownHostException": "unknown host",
    "java.net.ConnectException": "connection refused",
    "java.net.NoRouteToHostException": "no route to the host",
    "java.net.SocketTimeoutException": "connection timed out",
}


@dataclass(frozen=True)
class _Link:
    """One exception of the Java chain."""

    name: str
    message: str
    sql_state: str | None

    @property
    def short(self) -> str:
        return f"{self.name.rsplit('.', 1)[-1]}: {self.message}" if self.message else self.name.rsplit(".", 1)[-1]


def shown_url(url: str) -> str:
    """``url`` as messages show it: without ``user:password@`` and without its ``?...`` options."""
    bare = url.split("?", 1)[0].split(";", 1)[0]
    return re.sub(r"//[^/@]*@", "//", bare)


def database_error(
    exc: BaseException, *, doing: str, url: str, key: str, password: str | None = None, relation: str = "table"
) -> EngineError:
    """The engine's error for ``exc``, raised while it tried ``doing`` (``read the schema of
    public.orders``) at ``url``; ``key`` is the config node (``job.sources.db``), ``relation``
    the key under it that names what was read (``table`` or ``query``)."""
    chain = _chain(exc)
    where = f"cannot {doing} at {shown_url(url)}"
    driver = next((link for link in chain if link.sql_state), None)
    root = chain[-1] if chain else None
    state = driver.sql_state if driver is not None else None
    net = next((_NET_CAUSES[link.name] for link in chain if link.name in _NET_CAUSES), None)
    detail = _masked(_detail(driver, root, exc), password)
    if net or (state and state[:2] in ("08", "28")):
        kind = net or ("the login was refused" if state and state.startswith("28") else "cannot connect")
        return UnreachableError(f"{where}: {kind}: {detail}", key=key)
    if state and state.startswith("42"):
        return ConfigError(f"{where}: {detail}", key=f"{key}.{relation}")
    return JobFailedError(f"{where}: {detail} (key `{key}`)")


def _detail(driver: _Link | None, root: _Link | None, exc: BaseException) -> str:
    """The driver's message, and the root cause when it says more (``ConnectException: ...``)."""
    if driver is None and root is None:
        lines = str(exc).strip().splitlines()
        return lines[0] if lines else type(exc).__name__
    first = driver or root
    assert first is not None
    text = first.message or first.short
    if root is not None and root is not first and root.message and root.message not in text:
        text = f"{text} ({root.short})"
    return text


def _masked(text: str, password: str | None) -> str:
    return text.replace(password, "***") if password else text


def _chain(exc: BaseException) -> list[_Link]:
    """The Java exception under ``exc`` and its causes, outermost first; empty for a Python one."""
    java: Any = getattr(exc, "java_exception", None)
    links: list[_Link] = []
    while java is not None and len(links) < _MAX_CHAIN:
        try:
            name = str(java.getClass().getName())
            message = str(java.getMessage() or "")
        except Exception:  # the gateway is gone: what Python has is all there is
            break
        links.append(_Link(name, message.strip().splitlines()[0] if message.strip() else "", _sql_state(java)))
        java = java.getCause()
    return links


def _sql_state(java: Any) -> str | None:
    try:
        state = java.getSQLState()
    except Exception:  # not a java.sql.SQLException: py4j finds no such method
        return None
    return str(state) if state else None
