"""Why a JSON or CSV record did not fit the schema, as Spark expressions over its raw text.

Spark's PERMISSIVE readers keep the raw text of a record they could not fit in the corrupt-record
column and null the fields that did not convert. :func:`corrupt_reason` names those fields: it
parses the raw text again with every field a STRING (``from_json`` / ``from_csv``) and reports each
field that is null in the typed row but holds text in the raw one, e.g. ``column `amount` value
"abc" is not a DECIMAL(12,2)``. The reparse sits behind ``CASE WHEN raw IS NOT NULL``, so only
corrupt records pay for it (and once each: the reparsed struct is bound to a lambda variable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

if TYPE_CHECKING:
    from pyspark.sql import Column

SHOWN_CHARS = 200
"""A value longer than this is cut in the reason (the whole record is in the error table's ``record``)."""


def corrupt_reason(fmt: str, schema: StructType, corrupt: str, options: dict[str, str]) -> Column:
    """The reason of each record whose ``corrupt`` column is set (null for the others)."""
    fields = [f for f in schema.fields if f.name != corrupt]
    raw = F.col(f"`{corrupt}`")
    texts = _reparse(fmt, raw, fields, options)
    named = F.element_at(F.transform(F.array(texts), lambda t: _mismatches(t, fields)), 1)
    fallback = F.lit(f"malformed {fmt.upper()} record: it does not parse")
    return F.when(raw.isNotNull(), F.coalesce(F.nullif(named, F.lit("")), fallback))


def _reparse(fmt: str, raw: Column, fields: list[StructField], options: dict[str, str]) -> Column:
    text_schema = StructType([StructField(f.name, StringType()) for f in fields])
    if fmt == "csv":
        return F.from_csv(raw, F.lit(text_schema.toDDL()), options)
    return F.from_json(raw, text_schema, options)


def _mismatches(texts: Column, fields: list[StructField]) -> Column:
    """``column `a` value "x" is not a INT; ...`` for each field the typed row lost."""
    parts = []
    for f in fields:
        text = texts.getField(f.name)
        shown = F.when(
            F.length(text) > SHOWN_CHARS, F.concat(F.substring(text, 1, SHOWN_CHARS), F.lit("..."))
        ).otherwise(text)
        why = F.concat(F.lit(f'column `{f.name}` value "'), shown, F.lit(f'" is not {_type_name(f)}'))
        parts.append(F.when(F.col(f"`{f.name}`").isNull() & text.isNotNull(), why))
    return F.concat_ws("; ", *parts)


def _type_name(field: StructField) -> str:
    name = field.dataType.simpleString().upper()
    return f"an {name}" if name[0] in "AEIOU" else f"a {name}"
