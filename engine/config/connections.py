"""Named connections: where a system is and how to log in to it, kept once outside the jobs.

A connection is one file, ``<name>.conf`` (HOCON), ``.yaml`` or ``.yml``, in
``$ENGINE_CONNECTIONS_DIR``, else in the config tree's ``connections/`` (``conf/connections/``).
A source or a sink (``sources.<name>``, ``sinks.<name>``: of the job, of a DAG, of the fan-out's
template), a ``lookup`` converter (its database reference) or a fan-out's ``discover`` says
``connection = <name>`` instead of repeating the connection's keys; its own keys win over the
connection's (a null one does not: the documented defaults a job leaves out are null; ``options``
are merged key by key). ``connection`` anywhere else is left alone. A value in the file may be
``ENC(...)`` (:mod:`engine.config.secrets`): the run decrypts it like any other, and masks it the
same way.

.. code-block:: yaml

    # conf/connections/shop_db.yaml
    type: jdbc
    url: jdbc:postgresql://db:5432/shop
    user: ingest
    password: ENC(gAAAAAB...)

An ``s3`` connection serves the buckets it lists, wherever a path names them (the warehouse,
sources, sinks): a run uses the ones ``storage.connections`` names (a list of connection names,
turned here into ``{name: the connection's keys}`` for :class:`engine.spec.app.StorageConf`).

.. code-block:: yaml

    # conf/connections/lake_s3.yaml
    type: s3
    buckets: [lake, landing]
    endpoint: https://minio.internal:9000   # leave out for AWS
    region: eu-west-1
    access_key: AKIA...
    secret_key: ENC(gAAAAAB...)

Kinds (``type``) and the keys each may hold, and the node types that may use them, are in
:data:`KINDS`. A missing or unknown connection, a key its kind does not take, or a connection of
another kind is a :class:`~engine.errors.ConfigError` naming the key and the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.config.hocon import load_hocon, load_yaml
from engine.config.paths import conf_dir
from engine.config.secrets import Secrets
from engine.errors import ConfigError

__all__ = ["CONNECTIONS_ENV", "KINDS", "connections_dir", "with_connections"]

CONNECTIONS_ENV = "ENGINE_CONNECTIONS_DIR"
KEY = "connection"
SUFFIXES = (".conf", ".yaml", ".yml")
_LOGIN = frozenset({"url", "user", "password", "driver"})
_S3 = frozenset({"buckets", "endpoint", "region", "access_key", "secret_key", "session_token", "path_style"})
_KAFKA = frozenset({"bootstrap_servers", "options"})
KINDS: dict[str, tuple[frozenset[str], dict[str, frozenset[str]]]] = {
    "jdbc": (_LOGIN | {"options"}, {"jdbc": _LOGIN | {"options"}, "jdbc_tables": _LOGIN, "lookup": _LOGIN}),
    "s3": (_S3, {}),
    "kafka": (_KAFKA, {"kafka": _KAFKA}),
}
"""``type`` -> (the keys a connection of that kind holds, {a node type that can use it: the keys
that node takes from it})."""


def connections_dir() -> Path:
    env = os.environ.get(CONNECTIONS_ENV)
    return Path(env).resolve() if env else conf_dir() / "connections"


class _Loaded(dict[str, tuple[dict[str, Any], Path]]):
    """The connections one config names, each read once: name -> (its keys, its file). With
    ``secrets``, its ``ENC(...)`` values are decrypted as it is read (an error names its file);
    ``used`` notes which connection each node that names one takes."""

    def __init__(self, secrets: Secrets | None, used: dict[str, str] | None) -> None:
        super().__init__()
        self.secrets = secrets
        self.used = used


def with_connections(
    data: dict[str, Any], *, secrets: Secrets | None = None, used: dict[str, str] | None = None
) -> dict[str, Any]:
    """A copy of the composed config ``data`` where every source (and fan-out discovery) of its
    ``job`` that names a ``connection`` holds the connection's keys and no ``connection``, and
    ``storage.connections`` holds the named object-store connections' keys. With ``secrets``,
    a connection's ``ENC(...)`` values are decrypted as its file is read (an error names that
    file, not the job's); ``used`` gets each node's key (``job.sources.db``) and the connection
    it names, for messages about that node."""
    loaded = _Loaded(secrets, used)
    data = _storage(data, loaded)
    job = data.get("job")
    if not isinstance(job, dict):
        return data
    out = dict(_nodes(job, "job", loaded))  # a copy: the composed config stays as it was
    dags = out.get("dags")
    if isinstance(dags, dict):
        out["dags"] = {n: _nodes(d, f"job.dags.{n}", loaded) for n, d in dags.items()}
    fan_out = out.get("fan_out")
    if isinstance(fan_out, dict):
        fan_out = dict(fan_out)
        if isinstance(fan_out.get("template"), dict):
            fan_out["template"] = _nodes(fan_out["template"], "job.fan_out.template", loaded)
        if isinstance(fan_out.get("discover"), dict):
            fan_out["discover"] = _filled(fan_out["discover"], "job.fan_out.discover", loaded)
        out["fan_out"] = fan_out
    return {**data, "job": out}


def _storage(data: dict[str, Any], loaded: _Loaded) -> dict[str, Any]:
    storage = data.get("storage")
    names = storage.get("connections") if isinstance(storage, dict) else None
    if names is None:
        return data
    assert isinstance(storage, dict)
    if names == []:
        return {**data, "storage": {**storage, "connections": {}}}
    key = "storage.connections"
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError("a list of connection names, e.g. [lake_s3]", key=key)
    found = {}
    for i, name in enumerate(names):
        if name not in loaded:
            loaded[name] = _load(name, f"{key}.{i}", loaded.secrets)
        conf, file = loaded[name]
        if conf["type"] != "s3":
            raise ConfigError(f"connection `{name}` is a {conf['type']} connection ({file}), not s3", key=f"{key}.{i}")
        found[name] = {k: v for k, v in conf.items() if k != "type"}
    return {**data, "storage": {**storage, "connections": found}}


def _nodes(node: Any, key: str, loaded: _Loaded) -> Any:
    """``node`` (a job, a DAG, a template) with its ``sources``, ``sinks`` and ``converters`` (a
    lookup's database) filled."""
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for part in ("sources", "sinks"):
        if isinstance(node.get(part), dict):
            out[part] = {n: _filled(s, f"{key}.{part}.{n}", loaded) for n, s in node[part].items()}
    if isinstance(node.get("converters"), list):
        out["converters"] = [_filled(c, f"{key}.converters.{i}", loaded) for i, c in enumerate(node["converters"])]
    return out


def _filled(node: Any, key: str, loaded: _Loaded) -> Any:
    if not isinstance(node, dict) or KEY not in node:
        return node
    out = {k: v for k, v in node.items() if k != KEY}
    name = node[KEY]
    if not isinstance(name, str) or not name:
        raise ConfigError("a connection is named by a text", key=f"{key}.{KEY}")
    if name not in loaded:
        loaded[name] = _load(name, f"{key}.{KEY}", loaded.secrets)
    if loaded.used is not None:
        loaded.used[key] = name
    conf, file = loaded[name]
    kind = conf["type"]
    takes = KINDS[kind][1].get(str(out.get("type")))
    if takes is None:
        users = ", ".join(sorted(KINDS[kind][1]))
        raise ConfigError(
            f"connection `{name}` is a {kind} connection ({file}); a `{out.get('type')}` cannot use it (only: {users})",
            key=f"{key}.{KEY}",
        )
    given = {k: v for k, v in conf.items() if k in takes}
    own = {k: v for k, v in out.items() if v is not None or k not in given}  # null: a documented default
    if isinstance(given.get("options"), dict) and isinstance(own.get("options"), dict):
        own["options"] = {**given["options"], **own["options"]}
    return {**given, **own}


def _load(name: str, key: str, secrets: Secrets | None) -> tuple[dict[str, Any], Path]:
    folder = connections_dir()
    file = next((folder / f"{name}{s}" for s in SUFFIXES if (folder / f"{name}{s}").is_file()), None)
    if file is None:
        known = sorted({p.stem for p in folder.glob("*") if p.suffix in SUFFIXES}) if folder.is_dir() else []
        listed = f"known: {', '.join(known)}" if known else "there is none"
        raise ConfigError(f"no connection `{name}` in {folder} ({CONNECTIONS_ENV}; {listed})", key=key)
    data = load_hocon(file) if file.suffix == ".conf" else load_yaml(file, resolve=True)
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
    conf = {str(k): v for k, v in data.items()}
    return (secrets.reveal_file(conf, str(file)) if secrets is not None else conf), file
