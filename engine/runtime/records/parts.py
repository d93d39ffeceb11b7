"""What a records DAG is built of: its source, converters, fork and sinks, made once from its spec,
and the chain they form over the records read."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.converters.base import Converter
from engine.converters.frame import finalize, to_frame
from engine.forks.fork import ErrorContext, Fork
from engine.forks.quality import Quality
from engine.forks.repeats import rejected_by_sinks
from engine.sinks.base import Sink
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, Source
from engine.spec import DagSpec
from engine.spec.places import METADATA_DIR

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class Parts:
    """One records DAG's plugins, shared by its planning, reading, staging and publishing."""

    spec: DagSpec
    job: str
    run_id: str
    source: Source
    steps: list[Converter]
    sinks: list[Sink]
    fork: Fork
    ctx: ErrorContext
    owned: set[tuple[str, bool]] = field(default_factory=set)
    """The places (and how shared) its last plan found the job owns already
    (:func:`~engine.runtime.records.planning.check_owners`)."""

    @classmethod
    def of(cls, spec: DagSpec, *, job: str, run_id: str) -> Parts:
        """Each plugin of ``spec`` built from its config; the source's scratch in the warehouse."""
        s = spec.source
        source: Source = s.entry.load()(s.conf, name=s.name, key=s.key, schema_ddl=s.schema_ddl)
        steps: list[Converter] = [st.entry.load()(st.conf, step=st.name, key=st.key) for st in spec.steps]
        sinks: list[Sink] = [sk.entry.load()(sk.conf, name=sk.name, key=sk.key) for sk in spec.sinks]
        if spec.warehouse:
            source.scratch = scratch_of(spec.warehouse, job, spec.name)
        quality = Quality.of(
            [st.rule() for st in steps], max_rejected=spec.max_rejected, gates=list(spec.gates), key=spec.key
        )
        fork = Fork(spec.branches, key=spec.key, quality=quality)
        ctx = ErrorContext(job=job, dag=spec.name, run_id=run_id, source=s.name)
        return cls(spec, job, run_id, source, steps, sinks, fork, ctx)

    @property
    def name(self) -> str:
        return self.spec.name

    def chain(self, read: DataFrame) -> DataFrame:
        """The converters, then what the sinks reject (a merge's repeated keys), finalized."""
        frame = to_frame(read, corrupt_column=CORRUPT_RECORD, reason_column=CORRUPT_REASON)
        for step in self.steps:
            frame = step.apply(frame)
        return finalize(rejected_by_sinks(frame, self.sinks, self.fork.predicates(None)))

    def sink(self, name: str) -> Sink:
        return next(s for s in self.sinks if s.name == name)


def scratch_of(warehouse: str, job: str, dag: str) -> str:
    """The DAG's scratch folder (:attr:`Source.scratch <engine.sources.base.Source.scratch>`),
    in the warehouse's metadata."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{job}.{dag}")[:80]
    digest = hashlib.sha1(json.dumps([job, dag]).encode()).hexdigest()[:12]  # job a.b, DAG c is not job a, DAG b.c
    return f"{warehouse.rstrip('/')}/{METADATA_DIR}/scratch/{readable}-{digest}"
