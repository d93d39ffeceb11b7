"""The flow service's own Delta tables, under ``<warehouse>/_engine/service/``, read and written with
delta-rs: no Spark, no JVM, and the same tables for every instance of the service.

Each table is append-only (appends never conflict, so several instances write at once) and its
readers keep the newest row per key. A reader keeps the rows of the table version it last read and
reads again only when a newer version exists, so a request that finds nothing new costs one look
at the log. Created with the engine's schema version (:data:`VERSION_PROPERTY`), refused when a
newer engine made it, and compacted and checkpointed as it grows, as the engine's metadata tables
are (:class:`engine.state.delta_table.RustMetaTable`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from engine.service.errors import Unavailable
from engine.state.delta_create import VERSION_PROPERTY, first_commit

log = logging.getLogger(__name__)

FRESH_SECONDS = 0.5
"""How old the rows a read answers may be when this instance wrote nothing since: a request then
costs no look at the log. Another instance's change shows within this."""
TIDY_AT_FILES = 64
"""Compact, vacuum and checkpoint a table once it holds this many data files: every change adds
one, and a reader opening the table replays every commit since the last checkpoint."""


class ServiceTable:
    """The table ``name`` under ``root`` (``<warehouse>/_engine/service``), of ``columns``
    (name, Delta type: ``string``, ``long``, ``boolean`` or ``timestamp``)."""

    def __init__(self, root: str, name: str, columns: tuple[tuple[str, str], ...], *, version: int = 1) -> None:
        self.path = os.path.join(root, name)
        self.name = name
        self.columns = columns
        self.version = version
        self._lock = threading.Lock()
        self._handle: Any = None
        self._seen: int | None = None
        self._rows: list[dict[str, Any]] = []
        self._looked = 0.0

    # -- reading --------------------------------------------------------------------------------

    def rows(self, *, fresh: bool = False) -> list[dict[str, Any]]:
        """Every row, as of the table's newest version, or as of at most :data:`FRESH_SECONDS`
        ago if this instance wrote nothing since and ``fresh`` is not asked (shared: do not
        change them)."""
        with self._lock:
            if not fresh and self._seen is not None and time.monotonic() - self._looked < FRESH_SECONDS:
                return self._rows
            table = self._open()
            try:
                self._looked = time.monotonic()
                table.update_incremental()
                current = table.version()
                if current != self._seen:
                    self._rows = [_aware(r) for r in table.to_pyarrow_table().to_pylist()]
                    self._seen = current
            except Exception as exc:  # the last good state, if there is one; else the caller answers 503
                if self._seen is None:
                    raise Unavailable(f"cannot read the service's {self.name} table at {self.path}: {exc}") from exc
                log.warning("cannot read the service's %s table (answering its last good state): %s", self.name, exc)
            return self._rows

    # -- writing --------------------------------------------------------------------------------

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        import pyarrow as pa
        from deltalake import write_deltalake

        listed = [{name: row.get(name) for name, _ in self.columns} for row in rows]
        if not listed:
            return
        data = pa.Table.from_pylist(listed, schema=self._arrow())
        with self._lock:
            table = self._open()
            self._looked = 0.0  # the next read reads what this wrote
            try:
                write_deltalake(table, data, mode="append")
                table.update_incremental()
                if len(table.file_uris()) >= TIDY_AT_FILES:
                    self._tidy(table)
            except Exception as exc:
                raise Unavailable(f"cannot write the service's {self.name} table at {self.path}: {exc}") from exc

    def _tidy(self, table: Any) -> None:
        try:
            table.optimize.compact()
            table.vacuum(dry_run=False)
            table.create_checkpoint()
        except Exception as exc:  # the rows are written; tidying is for later readers' speed
            log.warning("could not compact the service's %s table: %s", self.name, exc)

    # -- the table itself -----------------------------------------------------------------------

    def _open(self) -> Any:
        """The table, opened once (created first when missing). Call with the lock held."""
        if self._handle is None:
            from deltalake import DeltaTable
            from deltalake.exceptions import TableNotFoundError

            try:
                try:
                    self._handle = DeltaTable(self.path)
                except TableNotFoundError:
                    first_commit(self.path, self._schema_json(), {VERSION_PROPERTY: str(self.version)})
                    self._handle = DeltaTable(self.path)
            except OSError as exc:
                raise Unavailable(f"cannot reach the service's {self.name} table at {self.path}: {exc}") from exc
            self._check_version(self._handle)
        return self._handle

    def _check_version(self, table: Any) -> None:
        found = table.metadata().configuration.get(VERSION_PROPERTY)
        if found is not None and int(found) > self.version:
            self._handle = None
            raise Unavailable(
                f"the service's {self.name} table at {self.path} has schema version {found}, written by a newer "
                f"engine (this one knows version {self.version}): upgrade the engine"
            )

    def _schema_json(self) -> str:
        fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in self.columns]
        return json.dumps({"type": "struct", "fields": fields})

    def _arrow(self) -> Any:
        import pyarrow as pa

        kinds = {
            "string": pa.string(),
            "long": pa.int64(),
            "boolean": pa.bool_(),
            "timestamp": pa.timestamp("us", tz="UTC"),
        }
        return pa.schema([(n, kinds[t]) for n, t in self.columns])


def _aware(row: dict[str, Any]) -> dict[str, Any]:
    """Times as delta-rs reads them may be naive (UTC): make them aware."""
    return {
        k: v.replace(tzinfo=timezone.utc) if isinstance(v, datetime) and v.tzinfo is None else v for k, v in row.items()
    }


def newest(rows: Iterable[dict[str, Any]], *key: str, order: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The newest row (by ``order``) per ``key``."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        if k not in found or row[order] >= found[k][order]:
            found[k] = row
    return found


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
