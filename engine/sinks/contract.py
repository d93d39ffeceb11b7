"""A Delta sink's schema contract (``schema = evolve | freeze | rescue``): what a batch whose
columns differ from its table's may do to the table, decided at staging, before anything is
written.

The batch's columns are compared with the table's by name (case-insensitively, as Delta does):

- a column the table has and the batch does not is written as null, in every mode;
- a column whose batch type fits the table's without loss (``int`` into ``bigint``, ``float``
  into ``double``, a decimal into a wider one, ``date`` into ``timestamp``, ``void`` into
  anything) is cast to the table's type, in every mode: the table does not change;
- a column the batch has and the table does not is *new*; a column whose batch type does not
  fit the table's is *incompatible*.

``evolve`` (the default) adds new columns to the table (Delta's ``mergeSchema``) and refuses an
incompatible one; ``freeze`` refuses both; ``rescue`` changes the table only to add a
``_rescued`` string column, where each record keeps, as one JSON object, its values of new
columns and the values that do not fit their column's type (as text; the column gets null),
as Auto Loader's rescued data column does. A refusal is a :class:`SchemaContractError` naming the
sink, the table and every column: the DAG's batch fails at staging, nothing is published and
its watermark stays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)

from engine.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SchemaMode = Literal["evolve", "freeze", "rescue"]
RESCUED = "_rescued"
"""The column ``rescue`` keeps what does not fit in."""

_INTEGRAL: list[type[DataType]] = [ByteType, ShortType, IntegerType, LongType]
_DIGITS: dict[type[DataType], int] = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 19}


class SchemaContractError(EngineError):
    """A batch whose columns its sink's schema contract refuses; nothing was written."""


@dataclass(frozen=True)
class Drift:
    """How a batch's columns differ from its table's."""

    new: list[StructField] = field(default_factory=list)
    """In the batch, not in the table."""
    incompatible: list[tuple[StructField, StructField]] = field(default_factory=list)
    """(the table's column, the batch's) whose batch type does not fit the table's."""
    widened: list[StructField] = field(default_factory=list)
    """The table's columns the batch holds in a narrower type (cast up, the table unchanged)."""

    def described(self) -> list[str]:
        out = [f"new column `{f.name}` ({f.dataType.simpleString()})" for f in self.new]
        out += [
            f"column `{t.name}` is {t.dataType.simpleString()} in the table, {b.dataType.simpleString()} in the batch"
            for t, b in self.incompatible
        ]
        return out


def drift(table: StructType, batch: StructType) -> Drift:
    """How ``batch``'s columns differ from ``table``'s (types compared without their nullability:
    Delta stores nested types nullable, Spark's functions often make them not)."""
    by_name = {f.name.lower(): f for f in table.fields}
    new, incompatible, widened = [], [], []
    for column in batch.fields:
        held = by_name.get(column.name.lower())
        if held is None:
            new.append(column)
        elif bare(held.dataType) == bare(column.dataType):
            if held.name != column.name:
                widened.append(held)  # the table's spelling: the fast path matches names exactly
        elif fits(column.dataType, held.dataType):
            widened.append(held)
        else:
            incompatible.append((held, column))
    return Drift(new, incompatible, widened)


def bare(kind: DataType) -> DataType:
    """``kind`` with every nested field, element and value nullable and no field metadata."""
    if isinstance(kind, StructType):
        return StructType([StructField(f.name, bare(f.dataType), True) for f in kind.fields])
    if isinstance(kind, ArrayType):
        return ArrayType(bare(kind.elementType), True)
    if isinstance(kind, MapType):
        return MapType(bare(kind.keyType), bare(kind.valueType), True)
    return kind


def fits(narrow: DataType, wide: DataType) -> bool:
    """Whether every value of type ``narrow`` is a value of type ``wide`` (no loss, no failure)."""
    if isinstance(narrow, NullType) or bare(narrow) == bare(wide):
        return True
    integral = [t for t in _INTEGRAL if isinstance(narrow, t)]
    if integral:
        if any(isinstance(wide, t) for t in _INTEGRAL):
            return _INTEGRAL.index(type(narrow)) <= _INTEGRAL.index(type(wide))
        if isinstance(wide, DecimalType):
            return wide.precision - wide.scale >= _DIGITS[type(narrow)]
        if isinstance(wide, FloatType):
            return isinstance(narrow, (ByteType, ShortType))
        return isinstance(wide, DoubleType) and not isinstance(narrow, LongType)
    if isinstance(narrow, FloatType):
        return isinstance(wide, DoubleType)
    if isinstance(narrow, DecimalType) and isinstance(wide, DecimalType):
        return wide.scale >= narrow.scale and wide.precision - wide.scale >= narrow.precision - narrow.scale
    if isinstance(narrow, DateType):
        return isinstance(wide, TimestampNTZType)  # a time zone would decide the instant
    return False


@dataclass(frozen=True)
class Contract:
    """One sink's contract over its table."""

    mode: SchemaMode
    sink: str
    table: str
    merge: bool = False
    """The sink merges: a column the batch lacks needs Delta's schema evolution to be kept."""

    def apply(self, batch: DataFrame, schema: StructType | None) -> tuple[DataFrame, bool]:
        """``batch`` as the table (of ``schema``; ``None``: no table yet) may take it, and whether
        the write needs Delta's schema evolution (``mergeSchema``); raises
        :class:`SchemaContractError`."""
        names = {c.lower() for c in batch.columns}
        if self.mode == "rescue" and RESCUED.lower() in names:
            self._refuse([f"the batch has a `{RESCUED}` column of its own, which `rescue` fills (rename it)"], "")
        if schema is None:  # a new table takes the batch's columns (and rescue's own)
            return (batch.withColumn(RESCUED, _rescued([])) if self.mode == "rescue" else batch), False
        found = drift(schema, batch.schema)
        lacking = [f for f in schema.fields if f.name.lower() not in names and f.name.lower() != RESCUED.lower()]
        required = [f"the table's NOT NULL column `{f.name}` is not in the batch" for f in lacking if not f.nullable]
        if self.mode == "rescue":
            required += [
                f"column `{t.name}` is {t.dataType.simpleString()} NOT NULL in the table, "
                f"{b.dataType.simpleString()} in the batch: a value that does not fit cannot be null there"
                for t, b in found.incompatible
                if not t.nullable
            ]
            if required:
                self._refuse(required, "")
            frame, adds = self._rescue(batch, schema, found)
            return frame, adds or bool(lacking and self.merge)
        refused = required + (found.described() if self.mode == "freeze" else found.described()[len(found.new) :])
        if refused:
            hint = (
                "set `schema = evolve` to add new columns, or `rescue` to keep what does not fit in `_rescued`"
                if self.mode == "freeze"
                else "cast it in the chain, or set `schema = rescue` to keep the values that do not fit in `_rescued`"
            )
            self._refuse(refused, hint)
        return _cast_up(batch, found.widened), bool(found.new) or bool(lacking and self.merge)

    def _refuse(self, why: list[str], hint: str) -> None:
        raise SchemaContractError(
            f"sink `{self.sink}` (schema = {self.mode}) refuses the batch for Delta table {self.table}: "
            f"{'; '.join(why)}{f' ({hint})' if hint else ''}"
        )

    def _rescue(self, batch: DataFrame, schema: StructType, found: Drift) -> tuple[DataFrame, bool]:
        by_name = {f.name.lower(): f for f in schema.fields}
        rescued: list[Column] = [_text(F.col(_quoted(f.name)), f.dataType).alias(f.name) for f in found.new]
        changed = {b.name.lower(): t for t, b in found.incompatible}
        columns = []
        for f in batch.schema.fields:
            held = by_name.get(f.name.lower())
            if held is None:
                continue
            value = F.col(_quoted(f.name))
            if f.name.lower() in changed:
                cast, lost = _lossy_cast(batch, value, f.dataType, held.dataType)
                rescued.append(F.when(lost, _text(value, f.dataType)).alias(f.name))
                columns.append(F.when(~lost, cast).alias(held.name))
            elif bare(f.dataType) != bare(held.dataType) or f.name != held.name:
                columns.append(value.cast(held.dataType).alias(held.name))
            else:
                columns.append(value)
        return batch.select(*columns, _rescued(rescued).alias(RESCUED)), RESCUED.lower() not in by_name


def _lossy_cast(batch: DataFrame, value: Column, kind: DataType, target: DataType) -> tuple[Column, Column]:
    """``value`` (of type ``kind``) cast to ``target``, and whether that lost it: a cast Spark
    refuses, a text that does not parse (or a decimal rounded), a number truncated or out of
    range, a time cut to a date: any value that does not come back as it was."""
    cast = value.try_cast(target)
    if not _analyses(batch, cast):  # a pair Spark cannot cast at all: every value is rescued
        return F.lit(None).cast(target), value.isNotNull()
    lost = cast.isNull()
    if isinstance(kind, StringType):
        if isinstance(target, DecimalType):  # a text with more digits than the scale is rounded
            lost = lost | ~value.try_cast(DecimalType(38, 18)).eqNullSafe(cast.cast(DecimalType(38, 18)))
    elif _analyses(batch, back := cast.try_cast(kind)):
        lost = lost | ~back.eqNullSafe(value)
    return cast, value.isNotNull() & lost


def _analyses(batch: DataFrame, column: Column) -> bool:
    """Whether Spark accepts ``column`` over ``batch`` (analysed only: no job)."""
    try:
        _ = batch.select(column).schema
    except AnalysisException:
        return False
    return True


def _rescued(values: list[Column]) -> Column:
    """:data:`RESCUED`: a JSON object of those of ``values`` that are set, or null."""
    if not values:
        return F.lit(None).cast(StringType())
    text = F.to_json(F.struct(*values))
    return F.when(text != F.lit("{}"), text)


def _cast_up(batch: DataFrame, widened: list[StructField]) -> DataFrame:
    """``batch`` with the ``widened`` columns cast to the table's types, under the table's names."""
    if not widened:
        return batch
    by_name = {f.name.lower(): f for f in widened}
    return batch.select(
        *[
            F.col(_quoted(f.name)).cast(by_name[f.name.lower()].dataType).alias(by_name[f.name.lower()].name)
            if f.name.lower() in by_name
            else F.col(_quoted(f.name))
            for f in batch.schema.fields
        ]
    )


def _text(value: Column, kind: DataType) -> Column:
    """A value as the rescued column keeps it: a struct, array or map as JSON, others as text."""
    return value if _complex(kind) else value.cast("string")


def _complex(kind: DataType) -> bool:
    return isinstance(kind, StructType) or bool(re.match(r"(array|map)<", kind.simpleString()))


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
