"""What a foreign error says, through its chain of causes: Python's (``raise ... from``) and, for
an error that came through py4j, the Java throwable's (``getCause``). Spark wraps the error that
matters: a MERGE that breaks a CHECK constraint surfaces as ``Py4JJavaError: An error occurred
while calling o1711.execute`` over ``[TASK_WRITE_FAILED]`` (SQLSTATE 58030, an I/O class) over
``[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES]`` (23001). Importing nothing of the engine, it serves
every layer (:mod:`engine.state.conflicts` classifies by it, commit steps word their failures by it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_SQLSTATE = re.compile(r"SQLSTATE: ?([0-9A-Z]{5})")
_ERROR_CLASS = re.compile(r"^\[[A-Z][A-Z0-9_.]+\]")
_PY4J_CALL = "An error occurred while calling"
_WRAPPERS = ("TASK_WRITE_FAILED", "FAILED_EXECUTE_UDF", "Job aborted")
"""Spark's wrappers around the error of a task: the cause under them is what to say."""


_DEPTH = 16
"""At most this many errors of a chain are read (a Java cause chain may loop)."""


def chain(exc: BaseException) -> Iterator[Any]:
    """``exc``, the errors it was raised from, and under each that came through py4j its Java
    throwable and that one's causes; at most :data:`_DEPTH` in all. Every error walked stays
    referenced until the walk ends: py4j gives a new proxy for each ``getCause()``, and an
    ``id()`` freed and reused would end the walk early."""
    walked: list[Any] = []
    current: BaseException | None = exc
    while current is not None and len(walked) < _DEPTH and all(current is not w for w in walked):
        walked.append(current)
        yield current
        java = getattr(current, "java_exception", None)
        while java is not None and len(walked) < _DEPTH and not any(_same_java(java, w) for w in walked):
            walked.append(java)
            yield java
            java = _called(java, "getCause")
        current = current.__cause__ or current.__context__


def _same_java(java: Any, other: Any) -> bool:
    """Whether two py4j proxies stand for one Java object (``equals``; a cause loop)."""
    if isinstance(other, BaseException) or java is other:
        return java is other
    return bool(_called(java, "equals", other)) if hasattr(java, "equals") else False


def sqlstates(exc: BaseException) -> list[str]:
    """Every SQLSTATE the chain carries: PySpark's (``getSqlState``), Spark's throwables'
    (``getSqlState``), a JDBC driver's ``SQLException`` (``getSQLState``), or one Spark wrote into
    a message."""
    found: list[str] = []
    for error in chain(exc):
        state = _called(error, "getSqlState") or _called(error, "getSQLState")
        if state:
            found.append(str(state))
        found += _SQLSTATE.findall(_message(error) or "")
    return found


def telling_line(exc: BaseException) -> str:
    """The first line of the message that says what went wrong: the deepest error of the chain
    with an error class (``[DELTA_...]``) that is not one of Spark's wrappers of a task's error,
    else the first message that is not py4j's ``An error occurred while calling``."""
    lines = [line for error in chain(exc) if (line := _first(_message(error)))]
    wrappers = tuple(f"[{w}]" for w in _WRAPPERS)
    classed = [line for line in lines if _ERROR_CLASS.match(line) and not line.startswith(wrappers)]
    if classed:
        return classed[-1]
    plain = [line for line in lines if not line.startswith(_PY4J_CALL)]
    return plain[0] if plain else (lines[0] if lines else type(exc).__name__)


def _message(error: Any) -> str | None:
    if isinstance(error, BaseException):
        text = str(error)
        if text.startswith(_PY4J_CALL):  # py4j's, then the Java error's own text: taken from the throwable
            return text.splitlines()[0]
        return text
    value = _called(error, "getMessage")
    return str(value) if value is not None else None


def _first(text: str | None) -> str:
    """The first line; one ending in ``:`` with the few short lines it introduces (Delta's
    ``violated by row with values:`` then `` - v : -1``)."""
    lines = [line.strip() for line in (text or "").strip().splitlines()]
    if not lines:
        return ""
    if lines[0].endswith(":"):
        shown = [line for line in lines[1:4] if line and not line.startswith("at ")]
        return " ".join([lines[0], *shown])
    return lines[0]


def _called(target: Any, method: str, *args: Any) -> Any:
    """``target.method(*args)``, or ``None`` where it has no such method (a py4j proxy answers any name)."""
    getter = getattr(target, method, None)
    if not callable(getter):
        return None
    try:
        return getter(*args)
    except Exception:
        return None
