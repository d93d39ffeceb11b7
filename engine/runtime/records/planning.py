"""Planning a records DAG: this run's work units, the schema they are read with, and the chain built
and checked over an empty frame of it (every config mistake the records' types reveal surfaces
here, before anything is read or written); validating: the same checks without listing or reading.

A run skips the chain check when one with the same key passed before
(:mod:`engine.runtime.chain_check_key`); with nothing to read, it then reads no schema either.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.commit.owners import check_owner
from engine.converters.base import checking
from engine.converters.frame import DATASET
from engine.runtime.chain_check_key import chain_key, sql_settings
from engine.runtime.records.results import RecordsPlan
from engine.runtime.sqlcheck import check_parses
from engine.sinks.conf import TableSinkConf
from engine.sources.appended import READ_AGAIN
from engine.sources.base import PlanContext
from engine.sources.workunits import WorkUnit
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructType

    from engine.runtime.records.parts import Parts

log = logging.getLogger(__name__)


def plan(
    parts: Parts,
    spark: SparkSession,
    ctx: PlanContext,
    *,
    reuse: list[WorkUnit] | None = None,
    references: dict[str, int] | None = None,
) -> RecordsPlan:
    """Plan the run's work units (or take ``reuse``, an earlier run's stored plan) and check the
    chain. The steps read their references (:meth:`~engine.converters.base.Converter.pin`) at the
    versions of ``references``, or, for a new plan with something to read, at the versions of now,
    kept in the plan."""
    for step in parts.steps:
        step.pin(spark, (references or {}).get(step.step))
    planned = _planned(parts, spark, ctx, reuse)
    if reuse is None:
        _name_duplicating_sinks(parts, planned.units)
    if any(not u.empty for u in planned.units):
        _keep_references(parts, planned, noted=reuse is None)
    return planned


def validate(parts: Parts, spark: SparkSession, *, inputs_may_not_exist: frozenset[str] = frozenset()) -> None:
    """Check the config as planning does, listing and reading nothing: a schema that would need a
    Spark job to infer is skipped and SQL only parsed, or the chain checked over a declared schema
    (as it is when some of ``inputs_may_not_exist``, the input paths an upstream DAG writes, are
    among the inputs: the source still checks the others, and what needs no input at all)."""
    not_yet = inputs_may_not_exist
    parts.source.check(spark, not_yet=not_yet)
    check_owners(parts, spark)
    if not_yet or parts.source.conf.infers_schema:
        upstream = {p for st in parts.steps for p in st.conf.inputs()} & not_yet
        if parts.source.declared_schema() is not None and not upstream:  # a lookup's may not exist yet
            check_chain(parts, spark, parts.source.schema(spark, None))
        else:
            parse_only(parts, spark)
        return
    schema = parts.source.schema(spark, None, None)
    if schema is None:
        parse_only(parts, spark)
    else:
        check_chain(parts, spark, schema)


def _planned(parts: Parts, spark: SparkSession, ctx: PlanContext, reuse: list[WorkUnit] | None) -> RecordsPlan:
    settings = sql_settings(spark)  # before any read
    parts.source.check(spark)
    check_owners(parts, spark)
    units = reuse if reuse is not None else parts.source.plan(spark, ctx)
    idle = all(u.empty for u in units)
    declared = parts.source.schema_ddl  # the key of a declared schema needs no parse
    key = chain_key(settings, parts.spec, declared) if declared is not None else None
    checked = ctx.checked_chain()
    if idle and key is not None and key == checked:
        return _checked_before(parts, units)
    pins: list[tuple[str, str]] = []  # an inferred schema is pinned only once the chain checks
    held = replace(ctx, pin_schema=lambda fingerprint, ddl: pins.append((fingerprint, ddl)))
    schema = parts.source.schema(spark, units, held)
    if schema is None:
        parse_only(parts, spark)
        return RecordsPlan(units=units, schema=None)
    key = key or chain_key(settings, parts.spec, schema.json())
    if not pins and key == checked:
        if idle:
            return _checked_before(parts, units)
        log.info("dag %s: its chain passed this check before: not checked again", parts.name)
        return RecordsPlan(units=units, schema=schema, predicates=parts.fork.predicates(None))
    predicates = check_chain(parts, spark, schema)
    for fingerprint, ddl in pins:
        ctx.pin_schema(fingerprint, ddl)
    if checked != key:
        ctx.chain_passed(key)
    return RecordsPlan(units=units, schema=schema, predicates=predicates)


def _keep_references(parts: Parts, planned: RecordsPlan, *, noted: bool) -> None:
    """The versions the steps read their references at, kept in the plan; in a new plan, each
    dataset's status row says what it joined (``noted``)."""
    planned.references = {s.step: v for s in parts.steps if (v := s.pinned) is not None}
    if noted and planned.references:
        said = "; ".join(f"step `{step}` read its reference at version {v}" for step, v in planned.references.items())
        for unit in planned.units:
            if not unit.empty:
                unit.note = "; ".join(n for n in (unit.note, said) if n)


def check_owners(parts: Parts, spark: SparkSession) -> None:
    """Refuse a place another job owns (:func:`~engine.commit.owners.check_owner`), before
    anything is read; note those the job owns already (no need to claim them again)."""
    fs = HadoopFs(spark)
    for sink in parts.sinks:
        if isinstance(sink.conf, TableSinkConf):
            c, what = sink.conf, f"sink `{sink.name}` of job `{parts.job}`"
            key, within = f"{sink.key}.path", parts.spec.warehouse
            owner = check_owner(fs, c.path, job=parts.job, shared=c.shared, what=what, key=key, within=within)
            if owner is not None and owner.job == parts.job and owner.shared == c.shared:
                parts.owned.add((c.path, c.shared))


def check_chain(parts: Parts, spark: SparkSession, schema: StructType | None) -> dict[str, Column]:
    """Build the chain, the forks and each sink's branch over an empty frame of ``schema``:
    Spark analyses eagerly, so every mistake the records' types reveal raises here."""
    assert schema is not None
    probe = spark.createDataFrame([], schema).withColumn(DATASET, F.lit(None).cast("string"))
    with checking():
        frame = parts.chain(probe)
        preds = parts.fork.predicates(frame)
        for sink in parts.sinks:
            sink.check(parts.fork.branch(frame, sink.conf.from_, preds[sink.conf.from_], parts.ctx))
    return preds


def parse_only(parts: Parts, spark: SparkSession) -> None:
    """What can be checked without the records' schema: the SQL parses, and each step's own
    :meth:`~engine.converters.base.Converter.check` (regexes, datetime patterns)."""
    for converter in parts.steps:
        for sql in converter.conf.sql_expressions():
            check_parses(spark, sql, key=converter.key)
        converter.check(spark)
    for name, sql in parts.spec.branches.items():
        check_parses(spark, sql, key=f"{parts.spec.key}.forks.{name}")
    for gate in parts.fork.quality.gates:
        check_parses(spark, gate.sql, key=gate.key)


def _name_duplicating_sinks(parts: Parts, units: list[WorkUnit]) -> None:
    """A unit reading a file again whole (:data:`~engine.sources.appended.READ_AGAIN`) says
    which sinks then hold its earlier records twice, as a rewind's warning does."""
    twice = [f"sink `{s.name}`" for s in parts.sinks if s.conf.on_replay().effect == "DUPLICATES"]
    said = f"sinks that now hold its earlier records twice: {', '.join(twice)}" if twice else ""
    for unit in units:
        if READ_AGAIN in unit.note and said:
            unit.note = f"{unit.note} ({said})"
            log.warning("dag %s: %s: %s", parts.name, unit.dataset, unit.note)


def _checked_before(parts: Parts, units: list[WorkUnit]) -> RecordsPlan:
    """The plan of a run with nothing to read whose chain passed this check before: no schema,
    so nothing is read."""
    log.info("dag %s: nothing to read, and its chain passed this check before", parts.name)
    return RecordsPlan(units=units, schema=None)
