"""The chain's last step for the sinks that hold one row per key with ``duplicates = reject``
(:mod:`engine.sinks.repeats`): the records of a key whose rows differ leave every branch for the
error table, before the fork counts them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.converters.frame import DATASET, data_columns, is_rejected, reject
from engine.sinks.repeats import comparable, key_names, key_text, named_columns, row_image

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from engine.sinks.base import Sink
    from engine.sinks.conf import OneRowPer


def rejected_by_sinks(frame: DataFrame, sinks: list[Sink], branches: dict[str, Column]) -> DataFrame:
    """``frame`` (the chain's, not finalized) with what each sink holding one row per key under
    ``duplicates = reject`` cannot take rejected, sink after sink (a record one rejects is no
    longer valid for the next). ``branches``: the fork's predicates over ``frame``."""
    for sink in sinks:
        per = sink.conf.one_row_per()
        if per is None or per.rule.action != "reject" or sink.conf.from_ == "error":
            continue
        if any(c not in frame.columns or not comparable(frame.schema[c].dataType) for c in per.columns):
            continue  # the sink's check names the column missing, or one that cannot tell rows apart
        frame = rejecting(frame, sink=sink.name, per=per, in_branch=branches[sink.conf.from_])
    return frame


def rejecting(frame: DataFrame, *, sink: str, per: OneRowPer, in_branch: Column) -> DataFrame:
    """``frame`` (the chain's, before it is finalized) with the valid records of the sink's branch
    (``in_branch``) rejected where they share ``per.columns`` with a different one of their dataset."""
    by = per.columns
    live = in_branch & ~is_rejected()
    scope = [F.col(DATASET)] if DATASET in frame.columns else []
    window = Window.partitionBy(*scope, *named_columns(by), live)
    image = row_image(frame, data_columns(frame))
    differ = live & ~F.min(image).over(window).eqNullSafe(F.max(image).over(window))
    count = F.count(F.lit(1)).over(window).cast("string")
    reason = F.concat(
        F.lit(f"sink `{sink}`: key {key_names(by)} = "),
        key_text(by),
        F.lit(" has "),
        count,
        F.lit(
            f" records in this batch that are not all alike, and {per.what}: none is kept (choose one with "
            'duplicates = "last_by <column>")'
        ),
    )
    return reject(frame, differ, step=step_of(sink), reason=reason)


def step_of(sink: str) -> str:
    """The ``step`` of the error table's records a sink's rule rejected."""
    return f"sinks.{sink}"
