"""Documented keys with defaults, present while Hydra composes so that ``key=value`` overrides them.

Hydra refuses to override a key the config does not have (``+key=value`` adds one), and a job file
names only the keys it sets. Which keys the job's plugins document is known to higher layers only,
so the caller of :func:`~engine.config.run_app` passes a :data:`DocumentedDefaults` function. When
the job file is loaded, :func:`fill` adds each documented key it leaves out, with its default, and
notes what it added under :data:`FILLED`; after composition :func:`strip` removes every added key
that no override names and that still holds what was added (a named one stays, even at its
default). What compiles, and what ``--cfg job`` prints, is then exactly what the file and the
command line say. A key no documentation has is still refused by Hydra, naming it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from typing import Any

KeyPath = tuple[str | int, ...]
DocumentedDefaults = Callable[[dict[str, Any]], list[tuple[KeyPath, Any]]]
"""For a plain job, each documented key it leaves out (its path in the job) and the key's default."""

FILLED = "__documented_defaults__"
"""Where the job notes the keys :func:`fill` added: ``[[path, value], ...]``."""


def fill(job: dict[str, Any], documented: DocumentedDefaults | None) -> dict[str, Any]:
    """``job`` with the documented keys it leaves out added (in place)."""
    if documented is None:
        return job
    added = []
    for path, value in documented(job):
        parent = _parent(job, path)
        if parent is not None and not _has(parent, path[-1]):
            parent[path[-1]] = copy.deepcopy(value)  # type: ignore[index]
            added.append([list(path), value])
    if added:
        job[FILLED] = added
    return job


def strip(job: Any, named: Iterable[str] = ()) -> Any:
    """A composed (plain) job without the added keys no override names (in place). ``named``: the
    keys the command line overrides, as dotted paths in the job (``dags.d.publish.policy``). An
    added key an override names stays whatever its value, even the default's: the DAG-level
    ``publish.policy=full`` must override a job-level ``partial``, not vanish and inherit it. An
    added key no override names goes while it holds what was added."""
    if not isinstance(job, dict) or FILLED not in job:
        return job
    names = {tuple(re.sub(r"\[(\d+)\]", r".\1", n).split(".")) for n in named}
    for path, value in reversed(job.pop(FILLED)):
        parent = _parent(job, tuple(path))
        if parent is not None:
            _drop_unnamed(parent, path[-1], value, tuple(str(k) for k in path), names)
    return job


def _drop_unnamed(parent: Any, key: str | int, added: Any, at: tuple[str, ...], names: set[tuple[str, ...]]) -> None:
    if not _has(parent, key) or any(at[: len(n)] == n for n in names):  # it, or a node holding it, is named
        return
    now = parent[key]
    named_inside = any(n[: len(at)] == at for n in names)
    if isinstance(now, dict) and isinstance(added, dict) and (named_inside or now != added):
        for inner, value in added.items():
            _drop_unnamed(now, inner, value, (*at, str(inner)), names)
    elif now == added:
        del parent[key]


def _parent(job: dict[str, Any], path: KeyPath) -> dict[str, Any] | None:
    node: Any = job
    for key in path[:-1]:
        if not _has(node, key):
            return None
        node = node[key]
    return node if isinstance(node, dict) else None


def _has(node: Any, key: str | int) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)
