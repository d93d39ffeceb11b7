"""The fork: one persisted record frame, several branches, counted in one pass.

``valid`` holds records no step rejected (minus dropped duplicates), ``error`` the rejected ones
in the error-table layout, and each named branch the valid records its predicate holds for
(branches may overlap).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import Observation
from pyspark.sql import functions as F

from engine.commit.observations import observed
from engine.converters.base import first_line
from engine.converters.checks import boolean
from engine.converters.frame import (
    DATASET,
    DROPPED,
    ENGINE_PREFIX,
    ERRORS,
    FILE,
    PACKED,
    RECORD,
    data_columns,
    internals_of,
    is_rejected,
    unpacked,
)
from engine.errors import ConfigError
from engine.forks.quality import Quality
from engine.sinks.error_table import ORIGIN, RECORD_BYTES, RECORD_ID, Origins, record_id, with_record_ids

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import Column, DataFrame

    from engine.converters.frame import ColumnOf


@dataclass(frozen=True)
class BranchCounts:
    read: int
    dropped: int
    by_branch: dict[str, int]
    flagged: dict[str, int] = field(default_factory=dict)
    """The records each counted rule flagged, by step (:class:`~engine.forks.quality.Quality`)."""
    gates: dict[str, Any] = field(default_factory=dict)
    """The gates' aggregates over the valid records (``__gate<i>``, and a comparison's sides)."""
    origins: Origins | None = None
    """The least and greatest origin (:data:`FILE`) of the error branch's records, where the count
    took them: the error table reads only the ids it holds of that range
    (:func:`~engine.sinks.error_table.held_scope`)."""


@dataclass(frozen=True)
class ErrorContext:
    """What each rejected record is stamped with in the error branch."""

    job: str
    dag: str
    run_id: str
    source: str


class Fork:
    def __init__(self, branches: dict[str, str], *, key: str, quality: Quality | None = None) -> None:
        self.branches = branches
        self.key = key
        self.quality = quality or Quality()

    @property
    def observable(self) -> bool:
        """Whether the counts can be observed while a sink writes (:meth:`observed`): not with
        gates, which aggregate the valid records apart from the others."""
        return not self.quality.gates

    def predicates(self, frame: DataFrame | None, col: ColumnOf = F.col) -> dict[str, Column]:
        """Each branch's predicate over the finalized frame, checked against its schema (unchecked
        without ``frame``: a check of the same chain passed before); the engine's columns read with
        ``col``."""
        valid = ~is_rejected(col) & ~col(DROPPED)
        preds = {"valid": valid, "error": is_rejected(col)}
        for name, sql in self.branches.items():
            key = f"{self.key}.forks.{name}"
            try:  # analyse now, not mid-write; a non-boolean one is not cast
                pred = F.expr(sql) if frame is None else boolean(frame, sql, key=key, what=f"branch `{name}`")
            except AnalysisException as exc:
                raise ConfigError(f"branch `{name}`: {first_line(exc)}", key=key) from exc
            preds[name] = valid & F.coalesce(pred, F.lit(False))
        if frame is not None:
            for gate in self.quality.gates:
                gate.check(frame.where(valid))
        return preds

    def count(self, frame: DataFrame, preds: dict[str, Column]) -> BranchCounts:
        """One pass over ``frame`` counting every branch (this also fills the persisted cache)."""
        if self.quality.gates:
            return self._gated(frame, preds, [], [""])[""]
        row = frame.agg(*self._tallies(preds, frame)).first()
        assert row is not None
        return self._counts(row.asDict())

    def observed(self, frame: DataFrame, name: str) -> tuple[DataFrame, Observation]:
        """``frame`` (finalized, or :func:`~engine.converters.frame.packed`: then the counts read
        its struct where it lies, unless a named branch names an engine column; the frame returned
        may then be unpacked) counting every branch, as :meth:`count` does, while the action
        that reads it runs: the counts are the returned observation's (:meth:`observed_counts`) once
        that action has read ``frame`` to its end. (Exact for the writes of the built-in sinks: the
        counts are taken in the action's final stage, which Spark does not run twice.) The named
        branches were checked with the chain: their SQL is not checked again."""
        assert self.observable
        observation = Observation(name)
        if self._names_internals:  # its SQL reads them by name: they must be columns of their own
            frame = unpacked(frame)
        col = internals_of(frame)
        return frame.observe(observation, *self._tallies(self.predicates(None, col), frame, col)), observation

    @property
    def _names_internals(self) -> bool:
        """Whether a named branch's SQL names one of the engine's columns (``__engine_...``)."""
        return any(ENGINE_PREFIX in sql.lower() for sql in self.branches.values())

    def observed_counts(self, observation: Observation, *, wait: float = 30.0) -> BranchCounts | None:
        """The counts :meth:`observed` took; ``None`` if they have not arrived within ``wait``
        seconds (Spark hands them to a listener once the action has ended)."""
        values = observed(observation, wait=wait)
        return None if values is None else self._counts(values)

    def count_by_dataset(
        self, frame: DataFrame, preds: dict[str, Column], *, only: str, datasets: list[str] | None = None
    ) -> dict[str, BranchCounts]:
        """Like :meth:`count`, one row per dataset URN, in one pass. A frame without the dataset
        column holds one dataset, ``only``. With gates, each of ``datasets`` (the group's) is
        judged, one that read no record too, as it would be alone in its group."""
        if DATASET not in frame.columns:
            return {only: self.count(frame, preds)}
        if self.quality.gates:
            return self._gated(frame, preds, [F.col(DATASET)], datasets or [])
        rows = frame.groupBy(F.col(DATASET).alias("__dataset")).agg(*self._tallies(preds, frame)).collect()
        out = {}
        for row in rows:
            values = row.asDict()
            dataset = values.pop("__dataset")  # before the counts read the rest
            out[dataset] = self._counts(values)
        return out

    def _gated(
        self, frame: DataFrame, preds: dict[str, Column], by: list[Column], datasets: list[str]
    ) -> dict[str, BranchCounts]:
        """The counts with the gates' aggregates, in one pass: grouped by dataset (``by``, or one
        group ``""``) and by validity, the gates' values taken from the valid records' group. A
        dataset of ``datasets`` with no valid record has its gates evaluated over no rows
        (``count(*)`` is 0). The gates see the data columns of valid records only: a rejected
        record's values are nulls to them, so an expression that would fail on one (a division
        by a zero a rule rejected, a cast of a value a regex refused) does not."""
        valid = preds["valid"]
        data = set(data_columns(frame))
        masked = frame.select(
            *[(F.when(valid, F.col(f"`{c}`")) if c in data else F.col(f"`{c}`")).alias(c) for c in frame.columns]
        )
        keys = [*(c.alias("__dataset") for c in by), valid.alias("__valid")]
        gates = self.quality.gate_columns(masked)
        rows = masked.groupBy(*keys).agg(*self._tallies(preds, masked), *gates).collect()
        totals: dict[str, dict[str, Any]] = {d: {"__read": 0} for d in datasets}
        of_valid: dict[str, dict[str, Any]] = {}  # each dataset's gate values, from its valid records
        spans: dict[str, list[Origins | None]] = {}  # each dataset's origins, from both its groups
        for row in rows:
            values = row.asDict()
            dataset, is_valid = values.pop("__dataset", ""), values.pop("__valid")
            gate_values = {n: values.pop(n) for n in list(values) if n.startswith("__gate")}
            spans.setdefault(dataset, []).append(_popped_origins(values))
            if is_valid:
                of_valid[dataset] = gate_values
            into = totals.setdefault(dataset, {})
            for n, v in values.items():
                into[n] = (into.get(n) or 0) + (v or 0)
        empty: dict[str, Any] | None = None
        out = {}
        for dataset, values in totals.items():
            if dataset not in of_valid and empty is None:
                first = masked.limit(0).agg(*gates).first()
                empty = first.asDict() if first is not None else {}
            origins = merged_origins(spans.get(dataset, [(None, None)]))
            out[dataset] = replace(self._counts(values), gates=of_valid.get(dataset, empty or {}), origins=origins)
        return out

    def _tallies(self, preds: dict[str, Column], frame: DataFrame, col: ColumnOf | None = None) -> list[Column]:
        """The aggregates that count ``frame``'s branches (:func:`_tallies`) and its rules, the
        engine's columns read with ``col`` (by default, as ``frame`` holds them)."""
        read = col or internals_of(frame)
        return [*_tallies(preds, read, _origin(frame, read)), *self.quality.rule_columns(read)]

    def _counts(self, values: dict[str, Any]) -> BranchCounts:
        """:meth:`_tallies`' values as counts."""
        values = dict(values)
        origins = _popped_origins(values)
        flagged = self.quality.flagged({n: values.pop(n) for n in list(values) if n.startswith("__rule")})
        return replace(_branch_counts(values), flagged=flagged, origins=origins)

    def branch(self, frame: DataFrame, name: str, pred: Column, ctx: ErrorContext) -> DataFrame:
        rows = frame.where(pred)
        if name == "error":
            return error_rows(rows, ctx)
        return rows.select(*[F.col(f"`{c}`") for c in data_columns(frame)])

    def error_table_rows(self, frame: DataFrame, pred: Column, ctx: ErrorContext) -> DataFrame:
        """The error branch as the error table stores it: with each record's id, so that a range
        read again adds no record twice (a sink reading ``from = error`` gets no id column)."""
        rows = frame.where(pred)
        place = [F.lit(ctx.job), F.lit(ctx.dag), F.lit(ctx.source), _optional(rows, DATASET), _optional(rows, FILE)]
        identified = with_record_ids(rows, record_id(place, F.col(RECORD), _reasons()))
        raw = F.when(~F.is_valid_utf8(F.col(RECORD)), F.col(RECORD).cast("binary")).alias(RECORD_BYTES)
        return error_rows(identified, ctx, F.col(RECORD_ID), _optional(identified, FILE).alias(ORIGIN), raw)


def _tallies(preds: dict[str, Column], col: ColumnOf = F.col, origin: Column | None = None) -> list[Column]:
    """The aggregates a count of every branch takes: records read, dropped, and each branch's;
    with ``origin``, the least and greatest origin of the rejected records too. A finalized frame
    keeps the origin of rejected records alone (:func:`~engine.converters.frame.finalize`), so
    those are the whole column's: no predicate to evaluate again for every record (in an
    observation, row by row). Any other frame gives a wider range, which only reads more."""
    sums = [F.sum(p.cast("long")).alias(n) for n, p in preds.items()]
    spans = [] if origin is None else [F.min(origin).alias(_LOW), F.max(origin).alias(_HIGH)]
    return [F.count(F.lit(1)).alias("__read"), F.sum(col(DROPPED).cast("long")).alias("__dropped"), *sums, *spans]


_LOW, _HIGH = "__origin_low", "__origin_high"


def _origin(frame: DataFrame, col: ColumnOf) -> Column | None:
    """Where each record was read (:data:`FILE`, read with ``col``), if ``frame`` has it: a
    column, or packed."""
    packed_file = PACKED in frame.columns and FILE in frame.schema[PACKED].dataType.fieldNames()  # type: ignore[attr-defined]
    return col(FILE) if FILE in frame.columns or packed_file else None


def _popped_origins(values: dict[str, Any]) -> Origins | None:
    """The origins :func:`_tallies` took, taken out of ``values``; ``None`` if it took none."""
    if _LOW not in values:
        return None
    return values.pop(_LOW), values.pop(_HIGH)


def merged_origins(spans: Iterable[Origins | None]) -> Origins | None:
    """The range of origins covering every one of ``spans``; ``None`` if one is unknown."""
    lows, highs = [], []
    for span in spans:
        if span is None:
            return None
        if span[0] is not None and span[1] is not None:
            lows.append(span[0])
            highs.append(span[1])
    return (min(lows), max(highs)) if lows else (None, None)


def _branch_counts(values: dict[str, Any]) -> BranchCounts:
    """:func:`_tallies`' values (a sum over no rows is null) as counts."""
    values = dict(values)
    return BranchCounts(
        read=int(values.pop("__read")),
        dropped=int(values.pop("__dropped", 0) or 0),
        by_branch={n: int(v or 0) for n, v in values.items()},
    )


def _optional(frame: DataFrame, column: str) -> Column:
    return F.col(column) if column in frame.columns else F.lit(None).cast("string")


def _reasons() -> Column:
    """Every ``step: reason`` of a rejected record."""
    return F.transform(F.col(ERRORS), lambda e: F.concat_ws(": ", e["step"], e["reason"]))


def error_rows(rows: DataFrame, ctx: ErrorContext, *extra: str | Column) -> DataFrame:
    """Rejected records in the error-table layout (:data:`~engine.sinks.error_table.ERROR_TABLE_DDL`),
    then the ``extra`` columns of ``rows``."""
    return rows.select(
        F.lit(ctx.job).alias("job"),
        F.lit(ctx.dag).alias("dag"),
        F.lit(ctx.run_id).alias("run_id"),
        F.lit(ctx.source).alias("source"),
        F.col(ERRORS)[0]["step"].alias("step"),
        _reasons().alias("reasons"),
        F.make_valid_utf8(F.col(RECORD)).alias("record"),  # bytes that are not UTF-8 would make it unreadable
        F.current_timestamp().alias("error_time"),
        *extra,
    )
