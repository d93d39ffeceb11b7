"""A batch's rows that repeat a key, for a sink that holds one row per key (a Delta ``merge``, an
``apply_changes`` per key and sequence, a JDBC ``upsert``): the sink's ``duplicates`` rule
(:class:`~engine.sinks.conf.Repeats`), in Spark expressions.

A table merged on keys must hold each key once, and no rule may publish a guess of which row a
user meant. Rows that are the same in every column are one row, whatever the rule. Otherwise:

- ``reject``: the records of a key whose rows differ are all rejected into the error table, the
  reason naming the sink and the key (:func:`engine.forks.repeats.rejecting`, a step at the end of the chain, so they
  leave every branch and are counted as rejected). It judges each dataset's records apart, as
  the chain's windows do: the same key in two datasets of one batch is left to staging, where it
  fails the batch (:func:`one_per_key`), since neither dataset's record is the wrong one.
- ``fail``: staging fails the batch, naming the key (nothing is published, and the next run
  reads the same range: it fails again until the input or the rule changes).
- ``last_by``: staging keeps the row greatest by those columns; rows tied on them that differ
  fail the batch.

The check is one window over the keys in the plan that stages the sink (a shuffle of its
branch by the keys, which the MERGE or the upsert shuffles by anyway).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

    from engine.sinks.conf import OneRowPer

_TOP = "__engine_repeat_top"
_NTH = "__engine_repeat_nth"
_OK = "__engine_repeat_ok"


def one_per_key(df: DataFrame, *, sink: str, per: OneRowPer) -> DataFrame:
    """``df`` (a sink's branch) with one row per value of ``per.columns``, as its rule says; a
    value whose rows differ (and that ``last_by`` does not decide) fails the action that reads
    it, naming the sink and the key. Rows the same in every column are one row."""
    by, rule, what = per.columns, per.rule, per.what
    image = row_image(df, [c for c in df.columns if c not in by])
    key = Window.partitionBy(*named_columns(by))
    if rule.action == "last_by":
        order = [F.col(f"`{c}`").desc_nulls_last() for c in rule.last_by]
        df = df.withColumn(_TOP, F.rank().over(key.orderBy(*order))).where(F.col(_TOP) == 1).drop(_TOP)
    differ = ~F.min(image).over(key).eqNullSafe(F.max(image).over(key))
    count = F.count(F.lit(1)).over(key).cast("string")
    said = F.concat(F.lit(f"sink `{sink}`: key {key_names(by)} = "), key_text(by), F.lit(" has "), count)
    if rule.action == "last_by":
        tail = (
            f" rows in this batch that are not all alike with the greatest ({', '.join(rule.last_by)}): "
            f"`duplicates = {rule}` cannot choose between them; add a column that tells them apart"
        )
    elif rule.action == "reject":
        tail = (
            f" rows in this batch that are not all alike, read from different datasets (so none was rejected), and "
            f'{what}: every run fails the same way until a rule chooses one (duplicates = "last_by <column>")'
        )
    else:
        tail = f" rows in this batch that are not all alike (duplicates = fail), and {what}"
    checked = df.withColumn(_OK, F.when(differ, F.raise_error(F.concat(said, F.lit(tail)))).otherwise(F.lit(True)))
    first = F.row_number().over(key.orderBy(F.col(_OK)))
    return checked.withColumn(_NTH, first).where(F.col(_NTH) == 1).drop(_NTH, _OK)


def row_image(df: DataFrame, columns: list[str]) -> Column:
    """A value equal for two rows exactly when ``columns`` are (a struct; maps and variants, which
    Spark does not compare, as JSON)."""
    if not columns:
        return F.lit(0)
    parts = []
    for name in columns:
        value = F.col(f"`{name}`")
        parts.append((value if comparable(df.schema[name].dataType) else F.to_json(value)).alias(name))
    return F.struct(*parts)


def comparable(kind: DataType) -> bool:
    """Whether values of ``kind`` can be compared and grouped (not maps or variants, nor anything
    holding one): what a key column must be."""
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    if isinstance(kind, MapType | VariantType):
        return False
    if isinstance(kind, ArrayType):
        return comparable(kind.elementType)
    if isinstance(kind, StructType):
        return all(comparable(f.dataType) for f in kind.fields)
    return True


def key_text(by: list[str]) -> Column:
    """``(v1, v2)``: a key's values as text (``null`` for a null)."""
    values = [F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("null")) for c in by]
    return F.concat(F.lit("("), F.concat_ws(", ", *values), F.lit(")"))


def key_names(by: list[str]) -> str:
    """``(a, b)``: a key's column names."""
    return f"({', '.join(by)})"


def named_columns(names: list[str]) -> list[Column]:
    """The columns of ``names``, quoted."""
    return [F.col(f"`{n}`") for n in names]
