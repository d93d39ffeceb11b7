"""Create a Delta table by writing its first commit, without Spark and without pyspark: what
:class:`~engine.state.delta_table.RustMetaTable` uses for the engine's metadata tables and the flow
service (:mod:`engine.service`) for its own. delta-rs refuses the engine's table properties
(``engine.schema_version``) at creation, and Spark's table builder costs a second or more per
table. Commit 0 is put only if absent, so of several creators at once exactly one wins.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from engine.errors import EngineError
from engine.storage.blobs import blobs

log = logging.getLogger(__name__)

VERSION_PROPERTY = "engine.schema_version"
"""The table property holding the schema version of an engine-made table (refused if newer)."""


def first_commit(path: str, schema_json: str, configuration: dict[str, str]) -> bool:
    """Create a Delta table of ``schema_json`` (Spark's schema JSON) at the local ``path``: its
    commit 0 (protocol 1/2, no partitions), put only if absent. ``False``: it already existed."""
    log_dir = os.path.join(path, "_delta_log")
    os.makedirs(log_dir, exist_ok=True)
    text, checksum = _creation(schema_json, configuration)
    target = os.path.join(log_dir, f"{0:020d}.json")
    temp = os.path.join(log_dir, f".engine-create-{uuid.uuid4().hex}.tmp")  # not a commit name: ignored
    with open(temp, "w", encoding="utf-8") as out:
        out.write(text)
    try:
        os.link(temp, target)  # atomic and complete, fails if present
        created = True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: exclusive create, then the content
        created = _exclusive_write(target, text)
    finally:
        os.unlink(temp)
    if created:
        _write_checksum(log_dir, checksum)
    return created


def first_remote_commit(url: str, options: Mapping[str, str], schema_json: str, configuration: dict[str, str]) -> bool:
    """:func:`first_commit` on an object store: commit 0 put only if absent (a conditional put:
    :meth:`engine.storage.blobs.Blobs.create`), then its checksum. ``False``: it already existed."""
    text, checksum = _creation(schema_json, configuration)
    log_dir = blobs(f"{url.rstrip('/')}/_delta_log", options)
    if not log_dir.create(f"{0:020d}.json", text.encode()):
        return False
    try:  # best effort, as on a disk: a table without it is valid
        log_dir.write(f"{0:020d}.crc", checksum.encode())
    except EngineError as exc:
        log.debug("no checksum for %s: %s", url, exc)
    return True


def _creation(schema_json: str, configuration: dict[str, str]) -> tuple[str, str]:
    """Commit 0 of a new table and its checksum (``.crc``, as Delta writes one for an empty table:
    without it, Delta's first commit to the table rebuilds version 0's state with Spark jobs to
    derive the next checksum, seconds on a first run)."""
    now = int(time.time() * 1000)
    protocol: dict[str, Any] = {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema_json,
        "partitionColumns": [],
        "configuration": configuration,
        "createdTime": now,
    }
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "isBlindAppend": True, "engineInfo": "engine"}},
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    checksum = {
        "tableSizeBytes": 0,
        "numFiles": 0,
        "numMetadata": 1,
        "numProtocol": 1,
        "setTransactions": [],
        "domainMetadata": [],
        "metadata": metadata,
        "protocol": protocol,
        "allFiles": [],
    }
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    return text, json.dumps(checksum, separators=(",", ":"))


def _write_checksum(log_dir: str, checksum: str) -> None:
    """Version 0's checksum; best effort: a table without one is valid."""
    temp = os.path.join(log_dir, f".engine-crc-{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as out:
            out.write(checksum)
        os.replace(temp, os.path.join(log_dir, f"{0:020d}.crc"))
    except OSError as exc:
        log.debug("no checksum for %s: %s", log_dir, exc)
        with suppress(OSError):
            os.unlink(temp)


def _exclusive_write(path: str, text: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return True
