"""One row of the bad-input catalogue: a case, the job and data it runs on, what the run must
answer (exit code, a fragment of its message) and what it must leave in the tables.

A case is one or more :class:`Step`\\ s, run in order in a fresh directory of its own (``{dir}``
in any text below is that directory; the warehouse is ``{dir}/wh``). A step writes files (or
appends to them), then runs the command line ``./spark-submit.sh`` would run, in this process
(the test session's Spark, :func:`tests.helpers.run_cli`), and checks:

- ``code``: the exit code;
- ``says``: fragments that must all be in what it printed (stderr, then stdout), and ``never``:
  fragments that must not be (a Java stack trace, a Python traceback, a secret);
- ``tables``: a path under the warehouse and what an independent reader (delta-rs for a Delta
  table, pyarrow for a folder of files) finds there (:class:`Rows`; ``None``: nothing there).

Cases are grouped by where they came from, one module each (``cases_*.py``); each module's
``CASES`` is collected by ``test_catalogue.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_MARKERS = ("Traceback (most recent call last)", "\tat org.apache.", "\tat java.", "py4j.protocol.Py4JJavaError")
"""What a stack trace looks like on stderr (Python's, the JVM's, py4j's): never shown without ``debug=true``."""


@dataclass(frozen=True)
class Rows:
    """What a table or folder of files holds: ``count`` rows; ``unique``: columns whose values
    are each there once (the keys a merge holds once); ``values``: each column's sorted values;
    ``check``: any other test of the pyarrow table (with ``why`` shown when it fails)."""

    count: int | None = None
    unique: tuple[str, ...] = ()
    values: Mapping[str, list[Any]] = field(default_factory=dict)
    check: Callable[[Any], bool] | None = None
    why: str = ""


@dataclass(frozen=True)
class Step:
    """One command of a case (see the module)."""

    args: tuple[str, ...]
    code: int
    says: tuple[str, ...] = ()
    never: tuple[str, ...] = TRACE_MARKERS
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    """Paths under ``{dir}`` written before the command (``{dir}`` in text replaced)."""
    append: Mapping[str, str | bytes] = field(default_factory=dict)
    """Paths under ``{dir}`` appended to before the command."""
    tables: Mapping[str, Rows | None] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    before: Callable[[Path], None] | None = None
    """Anything else to do to ``{dir}`` first (a file made unreadable, a time set)."""
    absent: tuple[str, ...] = ()
    """Paths under ``{dir}`` that must not exist after the command (a table a refusal must not make)."""


@dataclass(frozen=True)
class Case:
    """A catalogue row: ``id`` (the test id), ``source`` (where it was found: ``58.1`` is item 1
    of issue 58; ``pass`` the new user's pass of 108 cases), and its steps."""

    id: str
    source: str
    steps: tuple[Step, ...]
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    """Written before the first step."""
    marks: tuple[Any, ...] = ()
    """pytest marks (``pytest.mark.postgres``, ...)."""


def case(
    id: str,
    source: str,
    args: tuple[str, ...] | list[str],
    code: int,
    says: tuple[str, ...] | str = (),
    *,
    files: Mapping[str, str | bytes] | None = None,
    tables: Mapping[str, Rows | None] | None = None,
    never: tuple[str, ...] = TRACE_MARKERS,
    env: Mapping[str, str] | None = None,
    before: Callable[[Path], None] | None = None,
    marks: tuple[Any, ...] = (),
    absent: tuple[str, ...] = (),
) -> Case:
    """A case of one step."""
    step = Step(
        tuple(args),
        code,
        (says,) if isinstance(says, str) else tuple(says),
        never,
        tables=tables or {},
        env=env or {},
        before=before,
        absent=absent,
    )
    return Case(id, source, (step,), files=files or {}, marks=marks)


def job_file(name: str, text: str) -> dict[str, str]:
    """``jobs/<name>.conf`` holding ``text`` (HOCON)."""
    return {f"jobs/{name}.conf": text}
