"""What the engine asks of a Delta table's log, answered by delta-rs (``deltalake``), which reads
the log as the protocol defines it: JSON commits, checkpoints and log cleanup included, on a local
disk or an object store (``options``: :func:`engine.storage.options.store_options`)."""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import DeltaTable

from engine.storage.options import local_path

__all__ = ["transaction_version"]


def transaction_version(table: str, app_id: str, options: Mapping[str, str] | None = None) -> int | None:
    """The latest version the table's ``txn`` actions record for ``app_id`` (Delta's idempotent
    writes: Spark's ``txnAppId``/``txnVersion``), ``None`` if none does."""
    uri = local_path(table) or table
    version = DeltaTable(uri, storage_options=dict(options or {})).transaction_version(app_id)
    return None if version is None else int(version)
