"""The names a lineage system knows a dataset by: OpenLineage's naming convention
(https://openlineage.io/docs/spec/naming), so the engine's datasets join those other tools report
(Spark's own integration, Airflow, dbt, Marquez) instead of standing beside them.

A plugin config says what it reads or writes through :meth:`PluginConf.lineage`; these functions
turn its path, JDBC URL or Kafka brokers into a ``(namespace, name)``. Pure Python, no JVM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.storage.paths import StoragePath

__all__ = ["DatasetName", "of_jdbc", "of_kafka", "of_path", "shown_url"]


@dataclass(frozen=True, order=True)
class DatasetName:
    """A dataset as OpenLineage names it."""

    namespace: str
    """Where it lives: ``file``, ``s3://bucket``, ``postgres://host:5432``, ``kafka://host:9092``."""
    name: str
    """What it is there: a path, ``db.schema.table``, a topic."""


_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "wasbs": "wasbs", "abfss": "abfss", "abfs": "abfs"}
"""Schemes whose authority is a bucket or container: the namespace holds it, the name is the key."""
_DATABASES = {
    "postgresql": ("postgres", 5432),
    "mysql": ("mysql", 3306),
    "mariadb": ("mysql", 3306),
    "sqlserver": ("sqlserver", 1433),
}
"""JDBC sub-protocols OpenLineage names otherwise, and their default ports."""


def of_path(path: str) -> DatasetName:
    """A file or table directory: ``file`` and the absolute path for a local one; an object store's
    ``<scheme>://<bucket>`` and the key (S3's connectors all named ``s3``); HDFS and other file
    systems their ``<scheme>://<host>[:<port>]`` and the path. Credentials in a URL's user part
    are never part of a name; nor is a trailing slash."""
    parsed = StoragePath.parse(path)
    if parsed.is_local:
        assert parsed.local is not None
        return DatasetName("file", parsed.local)
    parts = urlsplit(str(parsed))
    scheme = parts.scheme.lower()
    where = _authority(parts.netloc)
    if scheme in _OBJECT_STORES:
        return DatasetName(f"{_OBJECT_STORES[scheme]}://{where}", parts.path.strip("/"))
    return DatasetName(f"{scheme}://{where}" if where else scheme, parts.path.rstrip("/") or "/")


def shown_url(url: str) -> str:
    """``url`` without what may carry a password: its query string (``?password=``), SQL Server's
    ``;key=value`` properties, a login before the host (``//user:secret@host``) and Oracle's
    (``jdbc:oracle:thin:user/secret@host``)."""
    base = url.split("?", 1)[0].split(";", 1)[0]
    base = re.sub(r"(?<=//)[^/@]*@", "", base)
    return re.sub(r"^(jdbc:oracle:[a-z0-9]+:)[^@]*@", r"\1@", base, flags=re.IGNORECASE)


def of_jdbc(url: str, table: str) -> DatasetName:
    """A table over JDBC: ``postgres://host:port`` and ``database.schema.table`` (``public`` when the
    table names no schema), ``mysql://host:port`` and ``database.table``, ``sqlserver://host:port``
    and ``database.schema.table`` (``dbo``; the database from ``databaseName``),
    ``oracle://host:port`` and ``service.table``; another database its sub-protocol and host, and
    the table as written. The first host of a list names a replicated database; credentials in the
    URL are never part of a name; quotes around a table's parts are dropped."""
    table = table.replace('"', "").replace("`", "")
    rest = url.removeprefix("jdbc:")
    sub, _, tail = rest.partition(":")
    sub = sub.lower()
    if sub == "oracle":
        return _oracle(tail, table)
    named, default_port = _DATABASES.get(sub, (sub, None))
    if not tail.startswith("//"):
        return DatasetName(named, table)
    address, _, props = tail[2:].partition(";")  # SQL Server: host:port;databaseName=x;...
    authority, _, path = address.partition("/")
    host = _authority(authority.split(",")[0], default_port)  # a failover list: its first host
    if not host:
        return DatasetName(named, table)
    namespace = f"{named}://{host}"
    database = path.split("?")[0].strip("/")
    if named == "postgres":
        qualified = table if "." in table else f"public.{table}"
        return DatasetName(namespace, f"{database}.{qualified}" if database else qualified)
    if named == "mysql" and database and "." not in table:
        return DatasetName(namespace, f"{database}.{table}")
    if named == "sqlserver":
        settings = dict(p.split("=", 1) for p in props.split(";") if "=" in p)
        database = next((v for k, v in settings.items() if k.lower() in ("databasename", "database")), "")
        qualified = table if "." in table else f"dbo.{table}"
        return DatasetName(namespace, f"{database}.{qualified}" if database else qualified)
    return DatasetName(namespace, table)


def _oracle(tail: str, table: str) -> DatasetName:
    """``thin:@host:port/service``, ``thin:@//host:port/service`` or ``thin:@host:port:SID``."""
    address = tail.partition("@")[2].lstrip("/")
    host, _, rest = address.partition(":")
    port, _, service = rest.replace(":", "/", 1).partition("/") if rest else ("1521", "", "")
    if not host or "(" in host:  # a TNS descriptor: no host to name
        return DatasetName("oracle", table)
    return DatasetName(f"oracle://{host}:{port or 1521}", f"{service}.{table}" if service else table)


def _authority(netloc: str, default_port: int | None = None) -> str:
    """``host[:port]`` of a URL's authority, without its user part (IPv6 kept in brackets)."""
    hostport = netloc.rpartition("@")[2]
    if not hostport:
        return ""
    if hostport.startswith("["):  # [::1]:5432
        host, _, port = hostport[1:].partition("]")
        host, port = f"[{host}]", port.lstrip(":")
    else:
        host, _, port = hostport.partition(":")
    port = port or (str(default_port) if default_port else "")
    return f"{host}:{port}" if port else host


def of_kafka(bootstrap_servers: str, topic: str) -> DatasetName:
    """A topic: ``kafka://<first bootstrap server>`` and the topic's name."""
    first = bootstrap_servers.split(",")[0].strip()
    return DatasetName(f"kafka://{first.split('://')[-1]}", topic)
