"""A declared schema (Spark DDL, or Avro converted to it) is parsed by Spark on the driver; one
that does not parse is a config error naming the source's ``schema`` key, not a job failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.sources.base import CORRUPT_RECORD
from engine.sources.files import FilesSource
from tests.helpers import compile_dict


def files_source(lake: Path, schema: str, fmt: str = "json") -> FilesSource:
    raw = {
        "sources": {"in": {"type": "files", "format": fmt, "path": str(lake.parent / "in" / "*"), "schema": schema}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    spec = compile_dict(raw, lake).dags[0].source
    return FilesSource(spec.conf, name=spec.name, key=spec.key, schema_ddl=spec.schema_ddl)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ddl", "needle"),
    [
        pytest.param("id BIGINTT, v", "[PARSE_SYNTAX_ERROR]", id="syntax"),
        pytest.param("id BIGINTT, v STRING", 'Unsupported data type "BIGINTT"', id="unknown-type"),
        pytest.param("id INT,, v STRING", "[PARSE_SYNTAX_ERROR]", id="double-comma"),
        pytest.param("id DECIMAL(12,2", "[PARSE_SYNTAX_ERROR]", id="unclosed-type"),
        pytest.param("bigint", "it is one type, bigint", id="a-type-not-columns"),
    ],
)
def test_a_schema_that_does_not_parse_names_the_key(spark: Any, lake: Path, ddl: str, needle: str) -> None:
    source = files_source(lake, ddl)
    with pytest.raises(ConfigError, match=r"source `in`: the schema .* is not a Spark DDL list of columns") as info:
        source.schema(spark, None)
    assert info.value.key == "job.sources.in.schema"
    assert needle in info.value.message


@pytest.mark.parametrize(
    ("fmt", "columns"),
    [
        pytest.param("json", ["id", "v", CORRUPT_RECORD], id="json-keeps-the-corrupt-record"),
        pytest.param("parquet", ["id", "v"], id="parquet"),
    ],
)
def test_a_declared_schema_is_the_read_schema(spark: Any, lake: Path, fmt: str, columns: list[str]) -> None:
    schema = files_source(lake, "id BIGINT, `v` DECIMAL(12,2)", fmt).schema(spark, None)
    assert schema is not None
    assert schema.fieldNames() == columns
    assert schema["v"].dataType.simpleString() == "decimal(12,2)"
