"""The names a lineage system knows a dataset by: OpenLineage's naming convention
(https://openlineage.io/docs/spec/naming), so the engine's datasets join those other tools report
(Spark's own integration, Airflow, dbt, Marquez) instead of standing beside them.

A plugin config says what it reads or writes through :meth:`PluginConf.lineage`; these functions
turn its path, JDBC URL or Kafka brokers into a ``(namespace, name)``. Pure Python, no JVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.storage.paths import StoragePath

__all__ = ["DatasetName", "of_jdbc", "of_kafka", "of_path"]


@dataclass(frozen=True, order=True)
class DatasetName:
    """A dataset as OpenLineage names it."""

    namespace: str
    """Where it lives: ``file``, ``s3://bucket``, ``postgres://host:5432``, ``kafka://host:9092``."""
    name: str
    """What it is there: a path, ``db.schema.table``, a topic."""


_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "wasbs": "wasbs", "abfss": "abfss", "abfs": "abfs"}
"""Schemes whose authority is a bucket or container: the namespace holds it, the name is the key."""
_DATABASES = {"postgresql": ("postgres", 5432), "mysql": ("mysql", 3306), "mariadb": ("mysql", 3306)}
"""JDBC sub-protocols OpenLineage names otherwise, and their default ports."""


def of_path(path: str) -> DatasetName:
    """A file or table directory: ``file`` and the absolute path for a local one; an object store's
    ``<scheme>://<bucket>`` and the key (S3's connectors all named ``s3``); HDFS and other file
    systems their ``<scheme>://<authority>`` and the path."""
    parsed = StoragePath.parse(path)
    if parsed.is_local:
        assert parsed.local is not None
        return DatasetName("file", parsed.local)
    parts = urlsplit(str(parsed))
    scheme = parts.scheme.lower()
    if scheme in _OBJECT_STORES:
        return DatasetName(f"{_OBJECT_STORES[scheme]}://{parts.netloc}", parts.path.strip("/"))
    return DatasetName(f"{scheme}://{parts.netloc}", parts.path or "/")


def of_jdbc(url: str, table: str) -> DatasetName:
    """A table over JDBC: ``postgres://host:port`` and ``database.schema.table`` (``public`` when the
    table names no schema), ``mysql://host:port`` and ``database.table``; another database its
    sub-protocol and authority, and the table as written."""
    rest = url.removeprefix("jdbc:")
    sub, _, tail = rest.partition(":")
    parts = urlsplit(f"{sub}:{tail.split(';')[0]}") if tail.startswith("//") else None  # SQL Server: ;key=value
    named, default_port = _DATABASES.get(sub.lower(), (sub.lower(), None))
    if parts is None or not parts.hostname:
        return DatasetName(named, table)
    port = parts.port or default_port
    namespace = f"{named}://{parts.hostname}{f':{port}' if port else ''}"
    database = parts.path.strip("/")
    if named == "postgres":
        qualified = table if "." in table else f"public.{table}"
        return DatasetName(namespace, f"{database}.{qualified}" if database else qualified)
    if named == "mysql" and database and "." not in table:
        return DatasetName(namespace, f"{database}.{table}")
    return DatasetName(namespace, table)


def of_kafka(bootstrap_servers: str, topic: str) -> DatasetName:
    """A topic: ``kafka://<first bootstrap server>`` and the topic's name."""
    first = bootstrap_servers.split(",")[0].strip()
    return DatasetName(f"kafka://{first.split('://')[-1]}", topic)
