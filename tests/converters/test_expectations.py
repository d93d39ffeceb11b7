"""Rule actions and thresholds on real Spark and Delta: a rule rejects, warns or fails the batch,
and a ``max_rejected`` (per rule, or the DAG's error budget) refuses a batch that flags too much.
A refused batch publishes nothing: no sink table, no error table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from tests.helpers import compile_dict, json_job, run_dict, write_jsonl

ROWS = [{"id": i, "amount": a} for i, a in enumerate([5, -1, 7, -3, 9, 2, 4, 8, 6, 1])]
"""Ten records, two of them (ids 1 and 3) with a negative amount."""


def run(spark: Any, lake: Path, converters: list[dict[str, Any]], rows: list[Any] = ROWS, **extra: Any) -> Any:
    src = write_jsonl(lake.parent / "in" / "rows.json", rows)
    result, _ = run_dict(spark, json_job(src, converters, **extra), lake)
    return result


def table(lake: Path, name: str) -> list[dict[str, Any]]:
    """The rows of a Delta table under the lake, read by delta-rs (none if it was never made)."""
    path = lake / name
    if not (path / "_delta_log").exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_warn_counts_the_records_and_lets_them_pass(spark: Any, lake: Path) -> None:
    rule = {"type": "check", "expr": "amount >= 0", "action": "warn", "name": "positive"}
    result = run(spark, lake, [rule])
    assert result.status == "SUCCEEDED", result.dags[0].message
    assert sorted(r["id"] for r in table(lake, "out")) == list(range(10))
    assert table(lake, "_errors/t") == []  # nothing was rejected
    (dag,) = result.summary()["dags"]
    assert dag["rules"] == {"positive": 2}
    assert dag["records_rejected"] == 0
    assert "warnings of 10 records: `positive` 2" in next(iter(dag["notes"].values()))


def test_expect_warns_by_default_and_its_threshold_fails_the_batch(spark: Any, lake: Path) -> None:
    passing = run(spark, lake, [{"type": "expect", "expr": "amount >= 0", "max_rejected": 2}])
    assert passing.status == "SUCCEEDED"
    assert passing.summary()["dags"][0]["rules"] == {"expect": 2}

    strict = run(spark, lake / "strict", [{"type": "expect", "expr": "amount >= 0", "max_rejected": "10%"}])
    (dag,) = strict.dags
    assert strict.status == "FAILED"
    assert "rule `expect` flagged 2 of 10 records (20.00%), over max_rejected = 10% (1 allowed)" in dag.message
    assert table(lake / "strict", "out") == []


@pytest.mark.parametrize(
    ("threshold", "published"),
    [
        pytest.param(2, True, id="count-at-limit"),
        pytest.param(1, False, id="count-over"),
        pytest.param("20%", True, id="share-at-limit"),
        pytest.param("19.9%", False, id="share-over"),
    ],
)
def test_reject_with_a_threshold(spark: Any, lake: Path, threshold: Any, published: bool) -> None:
    rule = {"type": "check", "expr": "amount >= 0", "max_rejected": threshold}
    result = run(spark, lake, [rule])
    if published:
        assert result.status == "SUCCEEDED"
        assert len(table(lake, "out")) == 8
        assert sorted(json.loads(e["record"])["id"] for e in table(lake, "_errors/t")) == [1, 3]
    else:
        assert result.status == "FAILED"
        assert (
            f"rule `check` rejected 2 of 10 records (20.00%), over max_rejected = {threshold}" in result.dags[0].message
        )
        assert table(lake, "out") == [] and table(lake, "_errors/t") == []  # the error table waits too


def test_fail_action_fails_on_one_record_and_passes_on_none(spark: Any, lake: Path) -> None:
    rule = {"type": "require", "columns": ["amount"], "action": "fail"}
    clean = run(spark, lake, [rule])
    assert clean.status == "SUCCEEDED" and len(table(lake, "out")) == 10

    dirty = run(spark, lake / "dirty", [rule], rows=[*ROWS, {"id": 10, "amount": None}])
    assert dirty.status == "FAILED"
    assert "rule `require` (action = fail) flagged 1 of 11 records" in dirty.dags[0].message
    assert table(lake / "dirty", "out") == []


def test_cast_and_parse_timestamp_warn_keep_the_record_with_a_null(spark: Any, lake: Path) -> None:
    rows = [{"id": 1, "n": "12", "ts": "2026-01-01 00:00:00"}, {"id": 2, "n": "x", "ts": "never"}]
    steps = [
        {"type": "cast", "columns": {"n": "int"}, "action": "warn"},
        {"type": "parse_timestamp", "column": "ts", "format": "yyyy-MM-dd HH:mm:ss", "action": "warn"},
    ]
    result = run(spark, lake, steps, rows=rows)
    assert result.status == "SUCCEEDED"
    by_id = {r["id"]: r for r in table(lake, "out")}
    assert by_id[1]["n"] == 12 and by_id[1]["ts"] is not None
    assert by_id[2]["n"] is None and by_id[2]["ts"] is None
    assert result.summary()["dags"][0]["rules"] == {"cast": 1, "parse_timestamp": 1}


def test_the_dags_error_budget_counts_every_rejection(spark: Any, lake: Path) -> None:
    steps = [
        {"type": "check", "expr": "amount >= 0"},
        {"type": "check", "expr": "id != 9", "name": "not_nine"},
    ]
    within = run(spark, lake, steps, max_rejected=3)
    assert within.status == "SUCCEEDED" and within.summary()["errors"] == 3

    over = run(spark, lake / "over", steps, max_rejected="25%")
    assert over.status == "FAILED"
    assert "the DAG's error budget rejected 3 of 10 records (30.00%), over max_rejected = 25% (2 allowed)" in (
        over.dags[0].message
    )


@pytest.mark.parametrize(
    ("conf", "key", "match"),
    [
        pytest.param(
            {"converters": [{"type": "check", "expr": "id > 0", "action": "fail", "max_rejected": 1}]},
            "job.converters[0]",
            "does not apply to `action = fail`",
            id="fail-with-threshold",
        ),
        pytest.param(
            {"converters": [{"type": "check", "expr": "id > 0", "max_rejected": "lots"}]},
            "job.converters[0].max_rejected",
            "a count",
            id="threshold-not-a-number",
        ),
        pytest.param(
            {"converters": [{"type": "expect", "expr": "id > 0", "action": "drop"}]},
            "job.converters[0].action",
            "reject",
            id="unknown-action",
        ),
        pytest.param({"max_rejected": "150%"}, "job.max_rejected", "between 0% and 100%", id="share-over-100"),
    ],
)
def test_rule_config_mistakes_name_the_key(lake: Path, conf: dict[str, Any], key: str, match: str) -> None:
    raw = {**json_job(lake / "in.json", []), **conf}
    with pytest.raises(ConfigError, match=match) as caught:
        compile_dict(raw, lake)
    assert caught.value.key == key
