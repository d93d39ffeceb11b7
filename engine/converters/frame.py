"""The record frame the converter chain works on: data columns plus the engine's own columns.

A record a step rejects keeps flowing with an entry (step, reason) in :data:`ERRORS`; the fork
sends it to the error branch. The original record rides along as a struct in :data:`SOURCE` and is
serialised to JSON only for rejected records, at :func:`finalize`, so valid records pay nothing
for it once Spark collapses the projections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.columns import DATASET as DATASET
from engine.columns import DROPPED as DROPPED
from engine.columns import ERRORS as ERRORS
from engine.columns import FILE as FILE
from engine.columns import READ_STEP as READ_STEP

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame

    ColumnOf = Callable[[str], Column]
    """Reads one of the engine's columns by name (:func:`internals_of`)."""

ENGINE_PREFIX = "__engine_"
"""How the names of the engine's own columns begin."""
SOURCE = "__engine_source"
RAW = "__engine_raw"
RECORD = "__engine_record"
WARNINGS = "__engine_warnings"
"""The rules (step names) a record failed without being rejected (``action = warn`` or ``fail``):
added by the first such rule, so a chain without one carries nothing for it."""
PACKED = "__engine_internals"
"""The persisted frame's one column for :data:`ERRORS`, :data:`RECORD`, :data:`FILE` and
:data:`DROPPED`: null for a record that is neither rejected, dropped nor warned of (:func:`packed`)."""
INTERNAL = (ERRORS, SOURCE, RAW, RECORD, DROPPED, DATASET, FILE, WARNINGS, PACKED)


def to_frame(df: DataFrame, *, corrupt_column: str, reason_column: str | None = None) -> DataFrame:
    """Add the engine's columns to a source's DataFrame. A record with its raw text in
    ``corrupt_column`` is rejected by step ``read``, for the reason in ``reason_column`` if the
    source gives one."""
    has_corrupt = corrupt_column in df.columns
    has_reason = reason_column is not None and reason_column in df.columns
    data = [c for c in df.columns if c not in (corrupt_column, reason_column, DATASET, FILE)]
    dataset = [F.col(DATASET)] if DATASET in df.columns else []
    place = F.col(FILE) if FILE in df.columns else F.input_file_name()
    raw = F.col(f"`{corrupt_column}`") if has_corrupt else F.lit(None).cast("string")
    generic = F.lit("malformed record or a value not matching the schema")
    why = F.coalesce(F.col(f"`{reason_column}`"), generic) if has_reason else generic
    unreadable = F.struct(F.lit(READ_STEP).alias("step"), why.alias("reason"))
    return df.select(
        *[F.col(f"`{c}`") for c in data],
        F.when(raw.isNotNull(), F.array(unreadable)).otherwise(no_errors()).alias(ERRORS),
        F.struct(*[F.col(f"`{c}`") for c in data]).alias(SOURCE),
        raw.alias(RAW),
        F.lit(False).alias(DROPPED),
        place.alias(FILE),
        *dataset,
    )


_ERRORS_TYPE = "array<struct<step:string,reason:string>>"
RECORD_JSON = {
    "ignoreNullFields": "false",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
"""How a rejected record is written to the error table: every field, timestamps to the microsecond
(Spark's default keeps milliseconds), so that a replay reads back the values it read."""


def reject(df: DataFrame, bad: Column, *, step: str, reason: Column | str) -> DataFrame:
    """Add ``(step, reason)`` to the errors of records where ``bad`` is true. A record an earlier
    step dropped is out of the stream: no later step rejects it (it stays counted as dropped)."""
    why = F.lit(reason) if isinstance(reason, str) else reason
    entry = F.struct(F.lit(step).alias("step"), why.alias("reason"))
    judged = bad & ~F.col(DROPPED)
    return df.withColumn(ERRORS, F.when(judged, F.array_append(F.col(ERRORS), entry)).otherwise(F.col(ERRORS)))


def warn(df: DataFrame, bad: Column, *, step: str) -> DataFrame:
    """Add ``step`` to the warnings of records where ``bad`` is true; they stay valid. A dropped
    record is not warned of (as :func:`reject`)."""
    if WARNINGS not in df.columns:
        df = df.withColumn(WARNINGS, no_warnings())
    flagged = F.array_append(F.col(WARNINGS), F.lit(step))
    return df.withColumn(WARNINGS, F.when(bad & ~F.col(DROPPED), flagged).otherwise(F.col(WARNINGS)))


def flagged(step: str, *, rejected: bool, col: ColumnOf = F.col) -> Column:
    """Whether ``step`` flagged the record: among its errors (a rule that rejects) or its warnings
    (the engine's columns read with ``col``)."""
    if rejected:
        return F.exists(col(ERRORS), lambda e: e["step"] == F.lit(step))
    return F.array_contains(col(WARNINGS), step)


def no_errors() -> Column:
    """The errors of a record no step rejected."""
    return F.array().cast(_ERRORS_TYPE)


def no_warnings() -> Column:
    """The warnings of a record no rule warned of."""
    return F.array().cast("array<string>")


def is_rejected(col: ColumnOf = F.col) -> Column:
    return F.size(col(ERRORS)) > 0


def data_columns(df: DataFrame) -> list[str]:
    return [c for c in df.columns if c not in INTERNAL]


def finalize(df: DataFrame) -> DataFrame:
    """Serialise the original record of rejected rows to JSON and drop the source struct. The file
    a record came from is kept for rejected rows only (the error table's record id): valid rows
    would otherwise carry their path into the persisted frame."""
    record = F.when(is_rejected(), F.coalesce(F.col(RAW), F.to_json(F.col(SOURCE), RECORD_JSON)))
    out = df.withColumn(RECORD, record).drop(SOURCE, RAW)
    return out.withColumn(FILE, F.when(is_rejected(), F.col(FILE))) if FILE in df.columns else out


def packed(df: DataFrame) -> DataFrame:
    """``df`` (finalized) as it is persisted: the engine's columns in one struct, null for a record
    that is neither rejected nor dropped. A valid record then stores one null, not an empty array,
    a null record, a null file and ``false`` (a cache stores every column it is given, constant or
    not). :func:`unpacked` gives the same columns back."""
    inside = [c for c in _PACKABLE if c in df.columns]
    if not inside:
        return df
    kept = [F.col(f"`{c}`") for c in df.columns if c not in inside]
    marked = is_rejected() | F.col(DROPPED)
    if WARNINGS in df.columns:
        marked = marked | (F.size(F.col(WARNINGS)) > 0)
    return df.select(*kept, F.when(marked, F.struct(*inside)).alias(PACKED))


def unpacked(df: DataFrame) -> DataFrame:
    """The columns of the frame :func:`packed` persisted, read lazily from its struct."""
    if PACKED not in df.columns:
        return df
    names = {field.name for field in df.schema[PACKED].dataType.fields}  # type: ignore[attr-defined]
    col = internals_of(df)
    restored = [col(c).alias(c) for c in _PACKABLE if c in names]
    return df.select(*[F.col(f"`{c}`") for c in df.columns if c != PACKED], *restored)


def internals_of(df: DataFrame) -> ColumnOf:
    """How to read the engine's columns of ``df``: by name, or, in a frame :func:`packed` made,
    from its struct (where null stands for no errors, not dropped, no warnings). An aggregate over
    a packed frame then reads the struct where it lies: no projection of the unpacked columns
    ahead of it (which a node without code generation, an observation, would make Spark build row
    by row)."""
    if PACKED not in df.columns:
        return F.col
    inside = F.col(PACKED)

    def read(name: str) -> Column:
        empty = _UNPACKED_EMPTY.get(name)
        return inside[name] if empty is None else F.coalesce(inside[name], empty())

    return read


_PACKABLE = (ERRORS, DROPPED, FILE, RECORD, WARNINGS)
_UNPACKED_EMPTY = {ERRORS: no_errors, DROPPED: lambda: F.lit(False), WARNINGS: no_warnings}
"""What a null packed struct stands for, by column (the others are null too)."""
