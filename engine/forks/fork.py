"""The fork: one persisted record frame, several branches, counted in one pass.

``valid`` holds records no step rejected (minus dropped duplicates), ``error`` the rejected ones
in the error-table layout, and each named branch the valid records its predicate holds for
(branches may overlap).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import Observation
from pyspark.sql import functions as F

from engine.converters.base import first_line
from engine.converters.checks import boolean
from engine.converters.frame import DATASET, DROPPED, ERRORS, FILE, RECORD, data_columns, is_rejected
from engine.errors import ConfigError
from engine.sinks.error_table import RECORD_ID, record_id, with_record_ids

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass(frozen=True)
class BranchCounts:
    read: int
    dropped: int
    by_branch: dict[str, int]


@dataclass(frozen=True)
class ErrorContext:
    """What each rejected record is stamped with in the error branch."""

    job: str
    dag: str
    run_id: str
    source: str


class Fork:
    def __init__(self, branches: dict[str, str], *, key: str) -> None:
        self.branches = branches
        self.key = key

    def predicates(self, frame: DataFrame | None) -> dict[str, Column]:
        """Each branch's predicate over the finalized frame, checked against its schema (unchecked
        without ``frame``: a check of the same chain passed before)."""
        valid = ~is_rejected() & ~F.col(DROPPED)
        preds = {"valid": valid, "error": is_rejected()}
        for name, sql in self.branches.items():
            key = f"{self.key}.forks.{name}"
            try:  # analyse now, not mid-write; a non-boolean one is not cast
                pred = F.expr(sql) if frame is None else boolean(frame, sql, key=key, what=f"branch `{name}`")
            except AnalysisException as exc:
                raise ConfigError(f"branch `{name}`: {first_line(exc)}", key=key) from exc
            preds[name] = valid & F.coalesce(pred, F.lit(False))
        return preds

    def count(self, frame: DataFrame, preds: dict[str, Column]) -> BranchCounts:
        """One pass over ``frame`` counting every branch (this also fills the persisted cache)."""
        row = frame.agg(*_tallies(preds)).first()
        assert row is not None
        return _branch_counts(row.asDict())

    def observed(self, frame: DataFrame, preds: dict[str, Column], name: str) -> tuple[DataFrame, Observation]:
        """``frame`` counting every branch, as :meth:`count` does, while the action that reads it
        runs: the counts are the returned observation's (:meth:`observed_counts`) once that action
        has read ``frame`` to its end. (Exact for the writes of the built-in sinks: the counts are
        taken in the action's final stage, which Spark does not run twice.)"""
        observation = Observation(name)
        return frame.observe(observation, *_tallies(preds)), observation

    @staticmethod
    def observed_counts(observation: Observation, *, wait: float = 30.0) -> BranchCounts | None:
        """The counts :meth:`observed` took; ``None`` if they have not arrived within ``wait``
        seconds (Spark hands them to a listener once the action has ended)."""
        if observation._jo is None:
            return None
        deadline = time.monotonic() + wait
        while observation._jo.getRowOrEmpty().isEmpty():  # each call waits 100 ms at most
            if time.monotonic() > deadline:
                return None
        return _branch_counts(dict(observation.get))

    def count_by_dataset(self, frame: DataFrame, preds: dict[str, Column], *, only: str) -> dict[str, BranchCounts]:
        """Like :meth:`count`, one row per dataset URN, in one pass. A frame without the dataset
        column holds one dataset, ``only``."""
        if DATASET not in frame.columns:
            return {only: self.count(frame, preds)}
        rows = frame.groupBy(F.col(DATASET).alias("__dataset")).agg(*_tallies(preds)).collect()
        out = {}
        for row in rows:
            values = row.asDict()
            out[values.pop("__dataset")] = _branch_counts(values)
        return out

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
        return error_rows(identified, ctx, RECORD_ID)


def _tallies(preds: dict[str, Column]) -> list[Column]:
    """The aggregates a count of every branch takes: records read, dropped, and each branch's."""
    sums = [F.sum(p.cast("long")).alias(n) for n, p in preds.items()]
    return [F.count(F.lit(1)).alias("__read"), F.sum(F.col(DROPPED).cast("long")).alias("__dropped"), *sums]


def _branch_counts(values: dict[str, Any]) -> BranchCounts:
    """:func:`_tallies`' values (a sum over no rows is null) as counts."""
    values = dict(values)
    return BranchCounts(
        read=int(values.pop("__read")),
        dropped=int(values.pop("__dropped") or 0),
        by_branch={n: int(v or 0) for n, v in values.items()},
    )


def _optional(frame: DataFrame, column: str) -> Column:
    return F.col(column) if column in frame.columns else F.lit(None).cast("string")


def _reasons() -> Column:
    """Every ``step: reason`` of a rejected record."""
    return F.transform(F.col(ERRORS), lambda e: F.concat_ws(": ", e["step"], e["reason"]))


def error_rows(rows: DataFrame, ctx: ErrorContext, *extra: str) -> DataFrame:
    """Rejected records in the error-table layout (:data:`~engine.sinks.error_table.ERROR_TABLE_DDL`),
    then the ``extra`` columns of ``rows``."""
    return rows.select(
        F.lit(ctx.job).alias("job"),
        F.lit(ctx.dag).alias("dag"),
        F.lit(ctx.run_id).alias("run_id"),
        F.lit(ctx.source).alias("source"),
        F.col(ERRORS)[0]["step"].alias("step"),
        _reasons().alias("reasons"),
        F.col(RECORD).alias("record"),
        F.current_timestamp().alias("error_time"),
        *extra,
    )
