"""A JSON or CSV record that does not fit the schema is rejected by step ``read`` with a reason
naming the column, its value and the type it should have had.

Found on real data: every such record said "malformed record or a value not matching the schema",
and a user with forty columns had to guess which one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.helpers import run_dict


def errors_of(lake: Path) -> dict[str, list[str]]:
    """Each rejected record's raw text -> its reasons, read with delta-rs."""
    rows = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    return {r["record"]: r["reasons"] for r in rows}


def job(path: Path, fmt: str, schema: str, **options: Any) -> dict[str, Any]:
    source = {"type": "files", "format": fmt, "path": str(path), "schema": schema, "options": options}
    return {"sources": {"in": source}, "sinks": {"out": {"type": "delta", "path": "out"}}}


@pytest.mark.parametrize(
    ("fmt", "lines", "options", "expected"),
    [
        pytest.param(
            "json",
            [
                '{"id": 1, "amount": "12.50", "day": "2026-01-01"}',
                '{"id": 2, "amount": "abc", "day": "2026-01-02"}',
                '{"id": "three", "amount": 3, "day": "someday"}',
                '{"id": 4, "amount": ',
            ],
            {},
            {
                '{"id": 2, "amount": "abc", "day": "2026-01-02"}': [
                    'read: column `amount` value "abc" is not a DECIMAL(12,2)'
                ],
                '{"id": "three", "amount": 3, "day": "someday"}': [
                    'read: column `id` value "three" is not an INT; column `day` value "someday" is not a DATE'
                ],
                '{"id": 4, "amount": ': ["read: malformed JSON record: it does not parse"],
            },
            id="json",
        ),
        pytest.param(
            "csv",
            ["id;amount;day", "1;12.50;2026-01-01", "2;abc;2026-01-02", "x;1;2026-13-45"],
            {"header": True, "sep": ";"},
            {
                "2;abc;2026-01-02": ['read: column `amount` value "abc" is not a DECIMAL(12,2)'],
                "x;1;2026-13-45": [
                    'read: column `id` value "x" is not an INT; column `day` value "2026-13-45" is not a DATE'
                ],
            },
            id="csv-with-options",
        ),
    ],
)
def test_a_record_not_fitting_the_schema_names_the_column_value_and_type(
    spark: Any, lake: Path, fmt: str, lines: list[str], options: dict[str, Any], expected: dict[str, list[str]]
) -> None:
    src = lake.parent / "in" / f"rows.{fmt}"
    src.parent.mkdir(parents=True)
    src.write_text("\n".join(lines) + "\n")

    result, _ = run_dict(spark, job(src, fmt, "id INT, amount DECIMAL(12,2), day DATE", **options), lake)

    assert errors_of(lake) == expected
    valid = DeltaTable(str(lake / "out")).to_pyarrow_table().to_pylist()
    assert [(r["id"], str(r["amount"])) for r in valid] == [(1, "12.50")]
    assert result.summary()["errors"] == len(expected)
