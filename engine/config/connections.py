"""Named connections: where a system is and how to log in to it, kept once outside the jobs.

A connection is one file, ``<name>.conf`` (HOCON), ``.yaml`` or ``.yml``, in
``$ENGINE_CONNECTIONS_DIR``, else in the config tree's ``connections/`` (``conf/connections/``).
A source says ``connection = <name>`` instead of repeating the connection's keys; its own keys win
over the connection's (a null one does not: the documented defaults a job leaves out are null). A
value in the file may be ``ENC(...)`` (:mod:`engine.config.secrets`): the run decrypts it like any
other, and masks it the same way.

.. code-block:: yaml

    # conf/connections/shop_db.yaml
    type: jdbc
    url: jdbc:postgresql://db:5432/shop
    user: ingest
    password: ENC(gAAAAAB...)

Kinds (``type``) and the keys each may hold, and the node types that may use them, are in
:data:`KINDS`. A missing or unknown connection, a key its kind does not take, or a connection of
another kind is a :class:`~engine.errors.ConfigError` naming the key and the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from engine.config.app import conf_dir
from engine.config.hocon import load_hocon
from engine.errors import ConfigError

__all__ = ["CONNECTIONS_ENV", "KINDS", "connections_dir", "with_connections"]

CONNECTIONS_ENV = "ENGINE_CONNECTIONS_DIR"
KEY = "connection"
SUFFIXES = (".conf", ".yaml", ".yml")
KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "jdbc": (frozenset({"url", "user", "password", "driver", "options"}), frozenset({"jdbc"})),
}
"""``type`` -> (the keys a connection of that kind holds, the node types that can use it)."""


def connections_dir() -> Path:
    env = os.environ.get(CONNECTIONS_ENV)
    return Path(env).resolve() if env else conf_dir() / "connections"


def with_connections(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of the composed config ``data`` where every node of its ``job`` that names a
    ``connection`` holds the connection's keys (its own keys first) and no ``connection``."""
    if not isinstance(data.get("job"), dict):
        return data
    return {**data, "job": _filled(data["job"], "job", {})}


def _filled(node: Any, key: str, loaded: dict[str, tuple[dict[str, Any], Path]]) -> Any:
    if isinstance(node, list):
        return [_filled(v, f"{key}[{i}]", loaded) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out = {k: _filled(v, f"{key}.{k}", loaded) for k, v in node.items() if k != KEY}
    name = node.get(KEY)
    if name is None:
        return out
    if not isinstance(name, str) or not name:
        raise ConfigError("a connection is named by a text", key=f"{key}.{KEY}")
    if name not in loaded:
        loaded[name] = _load(name, f"{key}.{KEY}")
    conf, file = loaded[name]
    kind = conf["type"]
    if out.get("type") not in KINDS[kind][1]:
        users = ", ".join(sorted(KINDS[kind][1]))
        raise ConfigError(
            f"connection `{name}` is a {kind} connection ({file}); a `{out.get('type')}` cannot use it (only: {users})",
            key=f"{key}.{KEY}",
        )
    own = {k: v for k, v in out.items() if v is not None or k not in conf}  # null: a documented default
    return {**{k: v for k, v in conf.items() if k != "type"}, **own}


def _load(name: str, key: str) -> tuple[dict[str, Any], Path]:
    folder = connections_dir()
    file = next((folder / f"{name}{s}" for s in SUFFIXES if (folder / f"{name}{s}").is_file()), None)
    if file is None:
        known = sorted({p.stem for p in folder.glob("*") if p.suffix in SUFFIXES}) if folder.is_dir() else []
        listed = f"known: {', '.join(known)}" if known else "there is none"
        raise ConfigError(f"no connection `{name}` in {folder} ({CONNECTIONS_ENV}; {listed})", key=key)
    data = load_hocon(file) if file.suffix == ".conf" else _yaml(file)
    if not isinstance(data, dict):
        raise ConfigError("a connection file holds keys and values", file=str(file))
    kind = data.get("type")
    if kind not in KINDS:
        kinds = ", ".join(KINDS)
        raise ConfigError(f"unknown connection type `{kind}`; use one of: {kinds}", key="type", file=str(file))
    extra = sorted(set(data) - KINDS[kind][0] - {"type"})
    if extra:
        raise ConfigError(
            f"a {kind} connection takes {', '.join(sorted(KINDS[kind][0]))}, not `{extra[0]}`",
            key=extra[0],
            file=str(file),
        )
    return {str(k): v for k, v in data.items()}, file


def _yaml(file: Path) -> Any:
    try:
        return OmegaConf.to_container(OmegaConf.load(file), resolve=True)
    except Exception as exc:  # omegaconf and yaml raise many kinds for a file that does not parse
        raise ConfigError(f"the connection file does not parse: {exc}", file=str(file)) from exc
