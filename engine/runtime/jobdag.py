"""A JobDag: read -> convert -> fork -> write, for one source.

``plan()`` builds the whole Spark plan lazily and checks it (missing input, SQL that does not
parse, unknown columns, sinks that cannot write their branch): every config mistake surfaces
there, before any data is read or written. ``run()`` executes a plan.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel

from engine.converters.base import Converter
from engine.converters.frame import finalize, to_frame
from engine.forks.fork import ErrorContext, Fork
from engine.runtime.sqlcheck import check_parses
from engine.sinks.base import Sink
from engine.sinks.error_table import ErrorTable
from engine.sources.base import CORRUPT_RECORD, Source
from engine.sources.conf import FilesSourceConf
from engine.spec import DagSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass
class DagPlan:
    frame: DataFrame
    predicates: dict[str, Column]
    sinks: list[tuple[Sink, DataFrame]]
    errors: DataFrame | None


@dataclass
class DagResult:
    name: str
    status: str
    message: str = ""
    records_read: int = 0
    records_rejected: int = 0
    records_dropped: int = 0
    sinks: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def records_written(self) -> int:
        return sum(self.sinks.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "records_read": self.records_read,
            "records_rejected": self.records_rejected,
            "records_dropped": self.records_dropped,
            "sinks": self.sinks,
            "seconds": round(self.seconds, 3),
        }


class JobDag:
    def __init__(self, spec: DagSpec, *, job: str, run_id: str) -> None:
        self.spec = spec
        self.job = job
        self.run_id = run_id
        s = spec.source
        self.source: Source = s.entry.load()(s.conf, name=s.name, key=s.key, schema_ddl=s.schema_ddl)
        self.steps: list[Converter] = [st.entry.load()(st.conf, step=st.name, key=st.key) for st in spec.steps]
        self.sinks: list[Sink] = [sk.entry.load()(sk.conf, name=sk.name, key=sk.key) for sk in spec.sinks]
        self.fork = Fork(spec.branches, key=spec.key)

    @property
    def name(self) -> str:
        return self.spec.name

    def plan(self, spark: SparkSession, *, validate_only: bool = False) -> DagPlan | None:
        """Build and check the DAG's plan. In validate mode a source whose schema would need a
        Spark job to infer is not read: its SQL expressions are only parsed."""
        self.source.check(spark)
        if validate_only and self._needs_inference():
            self._parse_only(spark)
            return None
        frame = to_frame(self.source.read(spark), corrupt_column=CORRUPT_RECORD)
        for step in self.steps:
            frame = step.apply(frame)
        frame = finalize(frame)
        preds = self.fork.predicates(frame)
        ctx = ErrorContext(job=self.job, dag=self.name, run_id=self.run_id, source=self.source.name)
        sinks = []
        for sink in self.sinks:
            df = self.fork.branch(frame, sink.conf.from_, preds[sink.conf.from_], ctx)
            sink.check(df)
            sinks.append((sink, df))
        errors = self.fork.branch(frame, "error", preds["error"], ctx) if self.spec.error_table else None
        return DagPlan(frame=frame, predicates=preds, sinks=sinks, errors=errors)

    def run(self, plan: DagPlan) -> DagResult:
        started = time.monotonic()
        frame = plan.frame
        if self.spec.persist != "NONE":
            frame.persist(getattr(StorageLevel, self.spec.persist))
        try:
            counts = self.fork.count(frame, plan.predicates)
            written = {}
            for sink, df in plan.sinks:
                log.info("dag %s: writing sink %s", self.name, sink.name)
                sink.write(df)
                written[sink.name] = counts.by_branch[sink.conf.from_]
            if plan.errors is not None and self.spec.error_table:
                self._write_errors(plan.errors, counts.by_branch["error"])
        finally:
            frame.unpersist()
        return DagResult(
            name=self.name,
            status="SUCCEEDED",
            records_read=counts.read,
            records_rejected=counts.by_branch["error"],
            records_dropped=counts.dropped,
            sinks=written,
            seconds=time.monotonic() - started,
        )

    def _write_errors(self, errors: DataFrame, count: int) -> None:
        """Append rejected records (the table was created before the DAGs started)."""
        if count and self.spec.error_table:
            ErrorTable(self.spec.error_table).append(errors)

    def _needs_inference(self) -> bool:
        conf = self.source.conf
        return isinstance(conf, FilesSourceConf) and conf.schema_ is None and conf.format in ("json", "csv")

    def _parse_only(self, spark: SparkSession) -> None:
        for step in self.spec.steps:
            for sql in step.conf.sql_expressions():  # type: ignore[attr-defined]
                check_parses(spark, sql, key=step.key)
        for name, sql in self.spec.branches.items():
            check_parses(spark, sql, key=f"{self.spec.key}.forks.{name}")
