"""A JSON or CSV source without a schema: its types are inferred from the first files read and
pinned (``_engine/schemas``), so later runs read with the same types; a later value that does not
fit goes to the error table.

Found on real data: a CSV source without a schema read every column as STRING, though the README
said the schema is inferred; and an inferred schema was inferred anew each run from that run's
files, so a day whose ``amount`` column was empty changed its type."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.state.delta_store import DeltaMetadataStore
from tests.helpers import run_with

T0 = float(int(time.time()) - 86_400)

CSV_1 = "id,amount,day\n1,1.50,2026-01-01\n2,2.25,2026-01-02\n"
CSV_2 = "id,amount,day\n3,abc,2026-01-03\n4,4.75,2026-01-04\n"  # alone, `amount` would infer as STRING
JSON_1 = '{"id": 1, "amount": 1.5, "day": "a"}\n{"id": 2, "amount": 2.25, "day": "b"}\n'
JSON_2 = '{"id": 3, "amount": "abc", "day": "c"}\n{"id": 4, "amount": 4.75, "day": "d"}\n'


def put(path: Path, text: str, *, mtime: float) -> None:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


@pytest.mark.parametrize(
    ("fmt", "first", "second", "options", "types"),
    [
        pytest.param(
            "csv", CSV_1, CSV_2, {"header": True}, {"id": "int32", "amount": "double", "day": "date32[day]"}, id="csv"
        ),
        pytest.param("json", JSON_1, JSON_2, {}, {"id": "int64", "amount": "double", "day": "string"}, id="json"),
    ],
)
def test_types_are_inferred_once_and_kept_by_later_runs(
    spark: Any, lake: Path, fmt: str, first: str, second: str, options: dict[str, Any], types: dict[str, str]
) -> None:
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    raw = {
        "sources": {"in": {"type": "files", "format": fmt, "path": str(land / f"*.{fmt}"), "options": options}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    put(land / f"a.{fmt}", first, mtime=T0)
    one = run_with(spark, raw, lake, store, run=1)
    put(land / f"b.{fmt}", second, mtime=T0 + 60)
    two = run_with(spark, raw, lake, store, run=2)

    assert [r.summary()["status"] for r in (one, two)] == ["SUCCEEDED", "SUCCEEDED"]
    out = DeltaTable(str(lake / "out")).to_pyarrow_table()
    assert {f.name: str(f.type) for f in out.schema} == types
    assert sorted(out.column("id").to_pylist()) == [1, 2, 4]
    errors = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    assert [e["reasons"] for e in errors] == [['read: column `amount` value "abc" is not a DOUBLE']]
    (pin,) = DeltaTable(str(lake / "_engine" / "schemas")).to_pyarrow_table().to_pylist()
    assert pin["run_id"] == "run-1" and "amount DOUBLE" in pin["ddl"]


@pytest.mark.parametrize(
    ("fmt", "first", "drifted", "options", "said"),
    [
        pytest.param(
            "json",
            JSON_1,
            '{"id": 3, "amount": 3.5, "day": "c", "coupon": "X1"}\n{"id": 4, "amount": 4.0, "day": "d", "vat": 1}\n',
            {},
            "field(s) `coupon`, `vat` are not in the pinned schema: they are not read",
            id="json-new-fields",
        ),
        pytest.param(
            "csv",
            CSV_1,
            "id,coupon,amount,day\n3,X1,3.50,2026-01-03\n",
            {"header": True},
            "the header has new column(s) `coupon`, which are not read",
            id="csv-inserted-column",
        ),
    ],
)
def test_a_later_file_that_drifts_from_the_pinned_schema_is_reported(
    spark: Any, lake: Path, fmt: str, first: str, drifted: str, options: dict[str, Any], said: str
) -> None:
    """A field the pinned schema does not read is said in the dataset's note, not dropped silently."""
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    raw = {
        "sources": {"in": {"type": "files", "format": fmt, "path": str(land / f"*.{fmt}"), "options": options}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    put(land / f"a.{fmt}", first, mtime=T0)
    one = run_with(spark, raw, lake, store, run=1)
    assert one.summary()["dags"][0]["notes"] == {}  # inferred from these files: nothing to say
    put(land / f"b.{fmt}", drifted, mtime=T0 + 60)
    two = run_with(spark, raw, lake, store, run=2)
    (dag,) = two.summary()["dags"]
    assert dag["status"] == "SUCCEEDED", dag
    (note,) = dag["notes"].values()
    assert f"schema drift in {(land / f'b.{fmt}').as_uri().replace('file:///', 'file:/')}: {said}" in note
    assert "declare job.sources.in.schema" in note or "declare sources.in.schema" in note, note


@pytest.mark.parametrize(
    ("fmt", "head", "options", "said"),
    [
        ("json", b'{"a": 1, "b": 2}\n{"a": 1, "c": {"x": 1}}\n', {}, "field(s) `b`, `c` are not"),
        ("json", b'{"a": 1}\n{"a": 1, "b": 2', {}, ""),  # the cut last line is not read
        ("json", b'{"a": 1, "b": 2}\n', {"multiLine": "true"}, ""),  # one document: not looked at
        ("json", b"not json\n[1, 2]\n", {}, ""),
        ("csv", b"a;b\n1;2\n", {"header": "true", "sep": ";"}, ""),
        ("csv", b"b,a\n", {"header": "true"}, ""),  # read by name
        (
            "csv",
            b"b,a\n",
            {"header": "true", "enforceSchema": "true"},
            "another order than the pinned schema's: `b`, `a`",
        ),
        ("csv", b"a\n1\n", {"header": "true"}, "the header has no column(s) `b`, so its records are rejected"),
        (
            "csv",
            b"a\n1\n",
            {"header": "true", "enforceSchema": "true"},
            "no column(s) `b`: values are read by position",
        ),
        ("csv", b"1,2,3\n4,5\n", {}, "lines of 3 values, the pinned schema has 2 columns"),
        ("csv", b"1,2\n", {}, ""),
        ("parquet", b"PAR1", {}, ""),
    ],
)
def test_drift_says_what_the_head_of_a_file_holds_that_the_columns_do_not(
    fmt: str, head: bytes, options: dict[str, str], said: str
) -> None:
    from engine.sources.drift import drift

    found = drift(fmt, head, ["a", "b"] if fmt == "csv" else ["a"], options, whole=not head.endswith(b"2"))
    assert (said in found) if said else found == "", found


def test_drift_is_looked_for_in_the_datasets_with_the_newest_files_only(
    spark: Any, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One open file per dataset: a source of many directories has the ones with the newest files
    looked at, up to ``DRIFT_LOOKS`` a run."""
    from engine.sources import files

    monkeypatch.setattr(files, "DRIFT_LOOKS", 2)
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    raw = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(land), "datasets": "directory"}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    for n, name in enumerate("abc"):
        put(land / name / "1.json", JSON_1, mtime=T0 + n)
    assert run_with(spark, raw, lake, store, run=1).summary()["status"] == "SUCCEEDED"
    drifted = '{"id": 3, "amount": 3.5, "day": "c", "coupon": "X1"}\n'
    for n, name in enumerate("abc"):
        put(land / name / "2.json", drifted, mtime=T0 + 60 + n)
    (dag,) = run_with(spark, raw, lake, store, run=2).summary()["dags"]
    noted = sorted(d.rsplit("/", 1)[-1] for d, note in dag["notes"].items() if "schema drift" in note)
    assert noted == ["b", "c"], dag["notes"]
