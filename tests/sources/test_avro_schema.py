"""Avro schemas become Spark DDL; malformed ones are config errors. No JVM."""

from __future__ import annotations

import json

import pytest

from engine.errors import ConfigError
from engine.sources.avro_schema import avro_to_ddl, load_avro_schema


def ddl(fields: list[dict[str, object]]) -> str:
    return avro_to_ddl(load_avro_schema(json.dumps({"type": "record", "name": "r", "fields": fields})))


@pytest.mark.parametrize(
    ("avro", "expected"),
    [
        pytest.param("long", "BIGINT", id="long"),
        pytest.param(["null", "string"], "STRING", id="nullable"),
        pytest.param({"type": "int", "logicalType": "date"}, "DATE", id="date"),
        pytest.param({"type": "long", "logicalType": "timestamp-micros"}, "TIMESTAMP", id="timestamp"),
        pytest.param({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, "DECIMAL(9,2)", id="dec"),
        pytest.param({"type": "array", "items": "double"}, "ARRAY<DOUBLE>", id="array"),
        pytest.param({"type": "map", "values": "int"}, "MAP<STRING, INT>", id="map"),
        pytest.param({"type": "enum", "name": "E", "symbols": ["A", "B"]}, "STRING", id="enum"),
        pytest.param(
            {"type": "record", "name": "In", "fields": [{"name": "x", "type": "float"}]},
            "STRUCT<`x`: FLOAT>",
            id="record",
        ),
    ],
)
def test_types_map_to_spark(avro: object, expected: str) -> None:
    assert ddl([{"name": "f", "type": avro}]) == f"`f` {expected}"


def test_named_types_are_reused() -> None:
    inner = {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]}
    assert (
        ddl([{"name": "a", "type": inner}, {"name": "b", "type": "P"}]) == "`a` STRUCT<`x`: INT>, `b` STRUCT<`x`: INT>"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("{not json", "not JSON", id="not-json"),
        pytest.param(json.dumps({"type": "record", "name": "r"}), "malformed Avro schema", id="no-fields"),
        pytest.param(json.dumps("string"), "must be of type `record`", id="not-record"),
        pytest.param(
            json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": ["int", "string"]}]}),
            "unsupported Avro union",
            id="union",
        ),
    ],
)
def test_bad_schemas_are_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        avro_to_ddl(load_avro_schema(text))
    assert needle in str(info.value)
