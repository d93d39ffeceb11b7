"""Each built-in converter on real Spark: what it keeps, what it rejects, and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from tests.helpers import json_job, run_dict, write_jsonl


def run(
    spark: Any, lake: Path, rows: list[Any], converters: list[dict[str, Any]], **extra: Any
) -> tuple[Any, Any, Any]:
    src = write_jsonl(lake.parent / "in" / "rows.json", rows)
    result, _ = run_dict(spark, json_job(src, converters, **extra), lake)
    valid = DeltaTable(str(lake / "out")).to_pyarrow_table().to_pylist()
    errors = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    return result, valid, errors


def test_cast_rejects_values_that_do_not_convert(spark: Any, lake: Path) -> None:
    rows = [{"id": 1, "n": "12"}, {"id": 2, "n": "x"}, {"id": 3, "n": None}]
    result, valid, errors = run(spark, lake, rows, [{"type": "cast", "columns": {"n": "int"}}])
    assert sorted((r["id"], r["n"]) for r in valid) == [(1, 12), (3, None)]
    (err,) = errors
    assert err["step"] == "cast"
    assert err["reasons"] == ["cast: cannot cast `n` value 'x' to int"]
    assert json.loads(err["record"]) == {"id": 2, "n": "x"}
    assert result.summary()["errors"] == 1


def test_rename_select_drop_and_derive(spark: Any, lake: Path) -> None:
    rows = [{"a": 1, "b": 2, "c": "z"}]
    steps = [
        {"type": "rename", "columns": {"a": "x"}},
        {"type": "derive", "columns": {"total": "x + b"}},
        {"type": "drop", "columns": ["c"]},
        {"type": "select", "columns": ["total", "x"]},
    ]
    _, valid, errors = run(spark, lake, rows, steps)
    assert valid == [{"total": 3, "x": 1}]
    assert errors == []


def test_require_check_and_regex_record_every_reason(spark: Any, lake: Path) -> None:
    rows = [
        {"id": 1, "amount": 5, "email": "a@b.io"},
        {"id": None, "amount": -1, "email": "nope"},
        {"id": 3, "amount": None, "email": None},
    ]
    steps = [
        {"type": "require", "columns": ["id"]},
        {"type": "check", "expr": "amount >= 0", "reason": "negative amount"},
        {"type": "regex", "column": "email", "pattern": "[^@]+@[^@]+"},
    ]
    _, valid, errors = run(spark, lake, rows, steps)
    assert [r["id"] for r in valid] == [1]
    by_record = {json.loads(e["record"])["id"]: e for e in errors}
    assert by_record[None]["step"] == "require"
    assert by_record[None]["reasons"] == [
        "require: `id` is null",
        "check: negative amount",
        "regex: `email` does not match [^@]+@[^@]+",
    ]
    assert by_record[3]["reasons"] == ["check: negative amount"]  # a null check result rejects


def test_regex_must_match_the_whole_value(spark: Any, lake: Path) -> None:
    rows = [{"code": "AB12"}, {"code": "xAB12x"}]
    _, valid, errors = run(spark, lake, rows, [{"type": "regex", "column": "code", "pattern": "[A-Z]{2}[0-9]{2}"}])
    assert [r["code"] for r in valid] == ["AB12"]
    assert [json.loads(e["record"])["code"] for e in errors] == ["xAB12x"]


def test_parse_timestamp_with_format_and_target(spark: Any, lake: Path) -> None:
    rows = [{"t": "2026-11-01 10:30:00"}, {"t": "yesterday"}]
    step = {"type": "parse_timestamp", "column": "t", "format": "yyyy-MM-dd HH:mm:ss", "target": "ts"}
    _, valid, errors = run(spark, lake, rows, [step])
    assert [r["ts"].isoformat() for r in valid] == ["2026-11-01T10:30:00+00:00"]
    assert valid[0]["t"] == "2026-11-01 10:30:00"
    assert errors[0]["reasons"] == [
        "parse_timestamp: cannot parse `t` value 'yesterday' as a timestamp (yyyy-MM-dd HH:mm:ss)"
    ]


@pytest.mark.parametrize(
    ("on_duplicate", "kept_versions", "rejected"),
    [pytest.param("drop", [3, 1], 0, id="drop"), pytest.param("reject", [3, 1], 2, id="reject")],
)
def test_dedupe_keeps_the_first_in_order(
    spark: Any, lake: Path, on_duplicate: str, kept_versions: list[int], rejected: int
) -> None:
    rows = [{"k": "a", "v": 1}, {"k": "a", "v": 3}, {"k": "a", "v": 2}, {"k": "b", "v": 1}]
    step = {"type": "dedupe", "keys": ["k"], "order_by": ["v DESC"], "on_duplicate": on_duplicate}
    result, valid, errors = run(spark, lake, rows, [step])
    assert [r["v"] for r in sorted(valid, key=lambda r: r["k"])] == kept_versions
    assert len(errors) == rejected
    dag = result.dags[0]
    assert dag.records_read == 4
    assert dag.records_dropped == (2 if on_duplicate == "drop" else 0)


def test_dedupe_ignores_rejected_records(spark: Any, lake: Path) -> None:
    rows = [{"k": "a", "v": None}, {"k": "a", "v": 1}]
    steps = [{"type": "require", "columns": ["v"]}, {"type": "dedupe", "keys": ["k"]}]
    _, valid, errors = run(spark, lake, rows, steps)
    assert valid == [{"k": "a", "v": 1}]
    assert len(errors) == 1


def test_malformed_and_mistyped_records_are_rejected_by_the_read_step(spark: Any, lake: Path) -> None:
    rows: list[Any] = ['{"id": 1, "n": 2}', '{"id": 2, "n": ', '{"id": "three", "n": 3}']
    _, valid, errors = run(spark, lake, rows, [], source={"schema": "id BIGINT, n INT"})
    assert valid == [{"id": 1, "n": 2}]
    assert sorted(e["record"] for e in errors) == ['{"id": "three", "n": 3}', '{"id": 2, "n": ']
    assert {e["step"] for e in errors} == {"read"}


@pytest.mark.parametrize(
    ("step", "key", "needle"),
    [
        pytest.param(
            {"type": "check", "expr": "amount >= AND 0"}, "job.converters[0]", "PARSE_SYNTAX_ERROR", id="parse"
        ),
        pytest.param({"type": "derive", "columns": {"x": "nope + 1"}}, "job.converters[0]", "nope", id="unknown-col"),
        pytest.param(
            {"type": "cast", "columns": {"n": "intt"}},
            "job.converters[0]",
            'Unsupported data type "INTT"',
            id="bad-type",
        ),
        pytest.param({"type": "rename", "columns": {"zz": "y"}}, "job.converters[0]", "zz", id="rename-missing"),
        pytest.param(
            {"type": "check", "expr": "n"},
            "job.converters[0].expr",
            "`n` is of type int, not boolean",
            id="check-not-boolean",
        ),
        pytest.param(
            {"type": "regex", "column": "n", "pattern": "[0-"},
            "job.converters[0].pattern",
            "does not compile: Illegal character range",
            id="regex-does-not-compile",
        ),
        pytest.param(
            {"type": "parse_timestamp", "column": "n", "format": "yyyy-MM-dd QQQQQQ"},
            "job.converters[0].format",
            "Spark refuses the datetime pattern",
            id="timestamp-format",
        ),
    ],
)
def test_bad_sql_is_a_config_error_before_anything_is_written(
    spark: Any, lake: Path, step: dict[str, Any], key: str, needle: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"n": 1}])
    with pytest.raises(ConfigError) as info:
        run_dict(spark, json_job(src, [step], source={"schema": "n INT"}), lake)
    assert info.value.key == key
    assert needle in str(info.value)
    assert list(lake.iterdir()) == []
