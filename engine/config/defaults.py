"""Documented keys with defaults, present while Hydra composes so that ``key=value`` overrides them.

Hydra refuses to override a key the config does not have (``+key=value`` adds one), and a job file
names only the keys it sets. Which keys the job's plugins document is known to higher layers only,
so the caller of :func:`~engine.config.run_app` passes a :data:`DocumentedDefaults` function. When
the job file is loaded, :func:`fill` adds each documented key it leaves out, with its default, and
notes what it added under :data:`FILLED`; after composition :func:`strip` removes every added key
that still holds what was added (a key an override changed stays). What compiles, and what
``--cfg job`` prints, is then exactly what the file and the command line say. A key no
documentation has is still refused by Hydra, naming it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
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


def strip(job: Any) -> Any:
    """A composed (plain) job without the added keys that still hold their default (in place)."""
    if not isinstance(job, dict) or FILLED not in job:
        return job
    for path, value in reversed(job.pop(FILLED)):
        parent = _parent(job, tuple(path))
        if parent is not None:
            _drop_unchanged(parent, path[-1], value)
    return job


def _drop_unchanged(parent: Any, key: str | int, added: Any) -> None:
    if not _has(parent, key):
        return
    now = parent[key]
    if now == added:
        del parent[key]
    elif isinstance(now, dict) and isinstance(added, dict):  # an override changed some of its keys
        for inner, value in added.items():
            _drop_unchanged(now, inner, value)


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
