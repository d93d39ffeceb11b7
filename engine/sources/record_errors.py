"""Why a JSON or CSV record did not fit the schema, as Spark expressions over its raw text.

Spark's PERMISSIVE readers keep the raw text of a record they could not fit in the corrupt-record
column and null the fields that did not convert. :func:`corrupt_reason` names those fields: it
reads each typed field's text out of the raw record again and reports each one that is null in the
typed row but holds text in the raw one, e.g. ``column `amount` value "abc" is not a
DECIMAL(12,2)``. A STRING column takes any value, so it is never the one that did not fit.

Every expression here has generated code, so the read, the reason and the converter chain stay one
whole-stage-generated projection: ``from_json`` and lambdas (``transform``) have none in Spark 4,
and one of them in that projection costs every record, not only the corrupt ones (issue 20). So a
JSON field's text comes from ``get_json_object`` (the same text ``from_json`` gives a STRING field;
of a key given twice, the first value), a CSV field's from ``from_csv`` with the reader's options.
The reason sits behind ``CASE WHEN raw IS NOT NULL`` and each field's text behind ``typed IS NULL``,
so only corrupt records pay for it, and only for their null fields.
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
    checked = [f for f in fields if not isinstance(f.dataType, StringType)]
    raw = F.col(f"`{corrupt}`")
    texts = _field_texts(fmt, raw, fields, checked, options)
    parts = [_mismatch(f, texts[f.name]) for f in checked]
    named = F.concat_ws("; ", *parts) if parts else F.lit("")
    fallback = F.lit(f"malformed {fmt.upper()} record: it does not parse")
    if fmt == "json" and str(options.get("multiLine", "false")).lower() != "true":
        # a line of a pretty-printed document (`[`, `  {"id": 1},`, `}`): the file is not JSON lines
        document = raw.rlike(r"^\s*[\[\]{}]\s*,?\s*$|^\s*\"[^\"]*\"\s*:")  # a bracket alone, or a member
        fallback = F.when(document, F.lit(DOCUMENT_LINE)).otherwise(fallback)
    said = F.coalesce(F.nullif(named, F.lit("")), fallback)
    return F.when(raw.isNotNull(), F.when(F.is_valid_utf8(raw), said).otherwise(F.lit(NOT_UTF8)))


DOCUMENT_LINE = (
    "malformed JSON record: it does not parse; the line looks like a part of one JSON document (an array "
    "or an object over several lines), not one record a line: if the files are such documents, set the "
    "source's options.multiLine = true"
)
"""Why a line of a pretty-printed JSON file read as JSON lines was rejected."""
NOT_UTF8 = (
    "malformed record: its bytes are not UTF-8 text (the error table keeps them in `record_bytes`); "
    "if the files use another encoding, set the source's options.encoding"
)
"""Why a record whose raw text is not UTF-8 was rejected: not its columns' fault."""


def _field_texts(
    fmt: str, raw: Column, fields: list[StructField], checked: list[StructField], options: dict[str, str]
) -> dict[str, Column]:
    """The text of each ``checked`` field in the raw record (null where it has none). A CSV record
    is split by position, so its text schema holds every one of ``fields``.

    ``get_json_object`` reaches a key by a path ``$['key']``, which cannot hold a quote: such a
    key is read with ``from_json`` (no generated code, so only such schemas pay for it)."""
    if fmt == "csv":
        parsed = F.from_csv(raw, F.lit(_text_schema(fields).toDDL()), options)
        return {f.name: parsed.getField(f.name) for f in checked}
    return {
        f.name: F.get_json_object(raw, f"$['{f.name}']")
        if "'" not in f.name
        else F.from_json(raw, _text_schema(checked), options).getField(f.name)
        for f in checked
    }


def _text_schema(fields: list[StructField]) -> StructType:
    return StructType([StructField(f.name, StringType()) for f in fields])


def _mismatch(field: StructField, text: Column) -> Column:
    """``column `a` value "x" is not an INT`` when the typed row lost the field's text."""
    shown = F.when(F.length(text) > SHOWN_CHARS, F.concat(F.substring(text, 1, SHOWN_CHARS), F.lit("..."))).otherwise(
        text
    )
    why = F.concat(F.lit(f'column `{field.name}` value "'), shown, F.lit(f'" is not {_type_name(field)}'))
    return F.when(F.col(f"`{field.name}`").isNull() & text.isNotNull(), why)


def _type_name(field: StructField) -> str:
    name = field.dataType.simpleString().upper()
    return f"an {name}" if name[0] in "AEIOU" else f"a {name}"
