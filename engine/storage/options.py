"""The settings that reach an object store, one source for every client of it.

Without a named connection the default AWS chain applies, as users know it: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``) and
``AWS_ENDPOINT_URL`` (an S3-compatible server). Spark's S3A connector reads the credentials from the
environment itself but not the endpoint: :func:`hadoop_settings` carries it (path-style addressing,
as S3-compatible servers need). delta-rs and obstore read the same variables; :func:`store_options`
adds what they need beside them (plain HTTP to an ``http://`` endpoint).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from engine.storage.paths import StoragePath

CREDENTIALS_FROM = "the AWS_* environment variables, ~/.aws, or the instance's role"
"""Where an object store client finds its settings when no connection names them (for messages)."""


def scheme(path: str) -> str:
    """``path``'s URL scheme, lower case (``""`` for a plain local path)."""
    parsed = StoragePath.parse(path)
    return parsed.scheme if parsed.is_url else ""


def local_path(path: str) -> str | None:
    """``path`` as an absolute local path if it names the local file system (no scheme, or
    ``file:``), else None."""
    return StoragePath.parse(path).local


def _endpoint(env: Mapping[str, str]) -> str:
    return env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or ""


def _region(env: Mapping[str, str]) -> str:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""


def hadoop_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop settings for S3A that the environment implies and S3A does not read itself."""
    env = os.environ if env is None else env
    settings = {}
    if endpoint := _endpoint(env):
        settings["fs.s3a.endpoint"] = endpoint
        settings["fs.s3a.path.style.access"] = "true"
    if region := _region(env):
        settings["fs.s3a.endpoint.region"] = region
    return settings


def bucket(path: str) -> str:
    """The bucket (or container, or host) of an object store URL."""
    return StoragePath.parse(path).authority


def connection_hadoop_settings(conn: Mapping[str, Any]) -> dict[str, str]:
    """S3A's per-bucket settings (``fs.s3a.bucket.<bucket>.*``) for each bucket an ``s3``
    connection serves: buckets of different connections never share credentials."""
    keys = {
        "endpoint": "endpoint",
        "region": "endpoint.region",
        "access_key": "access.key",
        "secret_key": "secret.key",
        "session_token": "session.token",
    }
    own = {suffix: str(conn[key]) for key, suffix in keys.items() if conn.get(key)}
    path_style = conn.get("path_style")
    if path_style is None:
        path_style = bool(conn.get("endpoint"))
    own["path.style.access"] = str(bool(path_style)).lower()
    if conn.get("session_token"):
        own["aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return {f"fs.s3a.bucket.{b}.{suffix}": value for b in conn["buckets"] for suffix, value in own.items()}


def connection_store_options(conn: Mapping[str, Any]) -> dict[str, str]:
    """delta-rs/obstore options of an ``s3`` connection (its unset keys: the environment's)."""
    keys = {
        "region": "aws_region",
        "access_key": "aws_access_key_id",
        "secret_key": "aws_secret_access_key",
        "session_token": "aws_session_token",
    }
    options = {name: str(conn[key]) for key, name in keys.items() if conn.get(key)}
    if endpoint := conn.get("endpoint"):
        options["aws_endpoint"] = str(endpoint)
        if str(endpoint).startswith("http://"):
            options["aws_allow_http"] = "true"
    path_style = conn.get("path_style")
    if path_style if path_style is not None else bool(endpoint):
        options["aws_virtual_hosted_style_request"] = "false"
    return options


def store_options(
    path: str, env: Mapping[str, str] | None = None, connection: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Options for delta-rs (``storage_options``) and obstore (``config``) of ``path``, beside what
    they read from the environment themselves, ``connection``'s (the ``s3`` connection serving its
    bucket) over the environment's: nothing for a local path."""
    env = os.environ if env is None else env
    if scheme(path) not in ("s3", "s3a", "s3n"):
        return {}
    if connection is not None:
        return {
            **store_options(path, {k: v for k, v in env.items() if k != "AWS_ENDPOINT_URL"}),
            **connection_store_options(connection),
        }
    options = {}
    if endpoint := _endpoint(env):
        options["aws_endpoint"] = endpoint
        options["aws_virtual_hosted_style_request"] = "false"
        if endpoint.startswith("http://"):
            options["aws_allow_http"] = "true"
    if region := _region(env):
        options["aws_region"] = region
    return options
