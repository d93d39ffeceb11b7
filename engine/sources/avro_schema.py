"""Avro schemas (the engine's schema contract) parsed with fastavro and turned into Spark DDL.

Pure Python on purpose: a job's schema is checked when it is compiled, before any JVM starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from engine.errors import ConfigError

_PRIMITIVES = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bytes": "BINARY",
    "string": "STRING",
}
_LOGICAL = {
    "date": "DATE",
    "timestamp-millis": "TIMESTAMP",
    "timestamp-micros": "TIMESTAMP",
    "local-timestamp-millis": "TIMESTAMP_NTZ",
    "local-timestamp-micros": "TIMESTAMP_NTZ",
    "uuid": "STRING",
}


def load_avro_schema(source: Path | str) -> dict[str, Any]:
    """Parse and check an Avro schema from an ``.avsc`` file or a JSON string."""
    where = str(source)
    try:
        text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    except OSError as exc:
        raise ConfigError(f"cannot read Avro schema: {exc.strerror}", file=where) from exc
    try:
        parsed = fastavro.parse_schema(json.loads(text), _write_hint=False)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed Avro schema: not JSON ({exc})", file=where) from exc
    except UnknownType as exc:
        raise ConfigError(f"malformed Avro schema: unknown type `{exc.name}`", file=where) from exc
    except (SchemaParseException, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"malformed Avro schema: {exc}", file=where) from exc
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise ConfigError("an Avro schema for records must be of type `record`", file=where)
    if not isinstance(json.loads(text).get("fields"), list):
        raise ConfigError("malformed Avro schema: a record needs a `fields` list", file=where)
    return parsed


def avro_to_ddl(schema: dict[str, Any]) -> str:
    """The Spark DDL of a record schema's fields: ``id BIGINT, name STRING, ...``."""
    named: dict[str, Any] = {}
    return ", ".join(_field_ddl(f, named) for f in _record_fields(schema, named))


def _record_fields(schema: dict[str, Any], named: dict[str, Any]) -> list[dict[str, Any]]:
    named[schema["name"]] = schema
    return list(schema["fields"])


def _field_ddl(field: dict[str, Any], named: dict[str, Any]) -> str:
    name = field["name"].replace("`", "``")
    return f"`{name}` {_type_ddl(field['type'], named)}"


def _type_ddl(avro: Any, named: dict[str, Any]) -> str:
    if isinstance(avro, list):
        return _union_ddl(avro, named)
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        if avro in named:
            return _type_ddl(named[avro], named)
        raise ConfigError(f"unsupported Avro type `{avro}`")
    logical = avro.get("logicalType")
    if logical == "decimal":
        return f"DECIMAL({avro['precision']},{avro.get('scale', 0)})"
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    kind = avro["type"]
    if kind == "record":
        fields = ", ".join(_field_ddl(f, named).replace("` ", "`: ", 1) for f in _record_fields(avro, named))
        return f"STRUCT<{fields}>"
    if kind == "array":
        return f"ARRAY<{_type_ddl(avro['items'], named)}>"
    if kind == "map":
        return f"MAP<STRING, {_type_ddl(avro['values'], named)}>"
    if kind == "enum":
        named[avro["name"]] = "string"
        return "STRING"
    if kind == "fixed":
        named[avro["name"]] = "bytes"
        return "BINARY"
    return _type_ddl(kind, named)


def _union_ddl(branches: list[Any], named: dict[str, Any]) -> str:
    non_null = [b for b in branches if b != "null"]
    if len(non_null) != 1:
        raise ConfigError(f"unsupported Avro union {json.dumps(branches)}: only [null, T] maps to a column")
    return _type_ddl(non_null[0], named)
