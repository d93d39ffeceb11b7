"""The runs table in Delta, under ``<warehouse>/_engine/runs``."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from engine.state.backends import AUTO
from engine.state.delta_table import meta_table, prefetch
from engine.state.runs import SCHEMA_VERSION, RunRecord, RunStore, latest_per_dag
from engine.state.status import Status

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import SparkSession

_DDL = (
    "run_id STRING, job STRING, dag STRING, status STRING, start_time TIMESTAMP, end_time TIMESTAMP, "
    "message STRING, records_read BIGINT, records_written BIGINT, records_rejected BIGINT, "
    "schema_version INT"
)


class DeltaRunStore(RunStore):
    """Constructing it starts opening the table and creates nothing; :meth:`ensure` (or the first
    append) creates it if missing, before any concurrency, and refuses a newer schema version."""

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        *,
        backend: str = AUTO,
        mask: Callable[[str], str] = lambda text: text,
        options: Mapping[str, str] | None = None,
    ) -> None:
        """``mask`` hides what must not be stored in a message (the secrets a run decrypted);
        ``options``: delta-rs's storage options for ``path`` on an object store."""
        self.spark = spark
        self.path = path
        self.mask = mask
        self.table = meta_table(
            spark, path, _DDL, version=SCHEMA_VERSION, what="runs", backend=backend, options=options
        )
        self._ensured = False
        prefetch([self.table])

    def ensure(self) -> DeltaRunStore:
        if not self._ensured:
            self.table.ensure()
            self._ensured = True
        return self

    def append(self, record: RunRecord) -> None:
        self.ensure().table.append(
            [
                {
                    **asdict(record),
                    "status": record.status.value,
                    "message": self.mask(record.message) if record.message else record.message,
                    "schema_version": SCHEMA_VERSION,
                }
            ]
        )

    def history(self, job: str, *, limit: int = 20) -> list[RunRecord]:
        if not self.table.exists():
            return []
        names = [f.name for f in fields(RunRecord)]
        rows = self.table.check().rows(job=job)
        records = [RunRecord(**{**{n: r[n] for n in names}, "status": Status(r["status"])}) for r in rows]
        records.sort(key=lambda r: (r.end_time is not None, r.end_time or r.start_time))
        return latest_per_dag(records)[:limit]
