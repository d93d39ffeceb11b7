"""CSV files whose header comes in another order (issue 58, item 2): read by the header's names,
whatever the schema's origin (declared, or inferred and pinned), each value in its own column.
Tables read with delta-rs."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.sources.csv_headers import header_of
from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with


def csv_job(inputs: Path, **source: Any) -> dict[str, Any]:
    options = {"header": True, **source.pop("options", {})}
    return {
        "sources": {"in": {"type": "files", "format": "csv", "path": str(inputs), "options": options, **source}},
        "sinks": {"lake": {"type": "delta", "path": "lake"}},
    }


def rows(path: Path) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"schema": "id INT, name STRING, city STRING"}, id="declared"),
        pytest.param({}, id="inferred-and-pinned"),
        pytest.param({"schema": "id INT, name STRING, city STRING", "on_corrupt": "skip"}, id="with-on-corrupt-skip"),
    ],
)
def test_a_header_in_another_order_is_read_by_name(
    spark: Any, lake: Path, tmp_path: Path, source: dict[str, Any]
) -> None:
    store = InMemoryMetadataStore()
    write(tmp_path / "in" / "a.csv", "id,name,city\n1,alice,paris\n2,bob,rome\n")
    first = run_with(spark, csv_job(tmp_path / "in", **source), lake, store, run=1).summary()
    assert first["status"] == "SUCCEEDED", first
    write(tmp_path / "in" / "b.csv", "id,city,name\n3,berlin,carol\n")
    second = run_with(spark, csv_job(tmp_path / "in", **source), lake, store, run=2).summary()
    assert (second["status"], second["errors"]) == ("SUCCEEDED", 0), second
    assert rows(lake / "lake") == [
        {"id": 1, "name": "alice", "city": "paris"},
        {"id": 2, "name": "bob", "city": "rome"},
        {"id": 3, "name": "carol", "city": "berlin"},
    ]


def test_files_of_one_run_in_several_orders_and_with_columns_lacking_or_added(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    write(tmp_path / "in" / "a.csv", "id,name,city\n1,alice,paris\n")
    write(tmp_path / "in" / "b.csv", "city,id,name\nberlin,3,carol\noslo,4,dan\n")
    write(tmp_path / "in" / "c.csv", "name,id\nerin,5\nfred,7\n")  # no city: its records rejected, not nulled
    write(tmp_path / "in" / "d.csv", "id,zip,city,name\n6,75001,lyon,fay\n")  # a column the schema lacks: not read
    write(tmp_path / "in" / "e.csv", "id,city,name\nx,nice,gus\n")  # a value that does not fit, named by its column
    write(tmp_path / "in" / "f.csv", "id, name ,city\n8,hal,rome\n")  # spaces around names: still by name
    spec = csv_job(tmp_path / "in", schema="id INT, name STRING, city STRING")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 3), summary
    assert rows(lake / "lake") == [
        {"id": 1, "name": "alice", "city": "paris"},
        {"id": 3, "name": "carol", "city": "berlin"},
        {"id": 4, "name": "dan", "city": "oslo"},
        {"id": 6, "name": "fay", "city": "lyon"},
        {"id": 8, "name": "hal", "city": "rome"},
    ]
    errors = sorted(DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist(), key=lambda e: e["record"])
    assert [e["record"] for e in errors] == ["erin,5", "fred,7", "x,nice,gus"]
    assert errors[2]["reasons"] == ['read: column `id` value "x" is not an INT'], errors[2]
    for lacking in errors[:2]:
        (reason,) = lacking["reasons"]
        assert "c.csv has no column(s) `city` of the schema (its columns: name, id)" in reason, reason
        assert "options.enforceSchema = true" in reason


def test_a_header_that_names_a_column_twice_fails_its_dataset_naming_the_file(
    spark: Any, lake: Path, tmp_path: Path
) -> None:
    write(tmp_path / "in" / "a.csv", "id,name,name,city\n1,a,b,c\n")
    spec = csv_job(tmp_path / "in", schema="id INT, name STRING, city STRING")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert summary["status"] == "FAILED"
    assert "a.csv names `name` twice: its columns cannot be read by name" in summary["dags"][0]["message"]
    assert not (lake / "lake").exists()


@pytest.mark.parametrize("key", ["enforceSchema", "enforceschema"])
def test_positional_reading_stays_where_the_user_asks_for_it(spark: Any, lake: Path, tmp_path: Path, key: str) -> None:
    """Also a schema that renames the header's columns, which read by name would find none of."""
    write(tmp_path / "in" / "b.csv", "Order ID,City,Name\n3,berlin,carol\n")
    spec = csv_job(tmp_path / "in", schema="id INT, name STRING, city STRING", options={key: True})
    run_with(spark, spec, lake, InMemoryMetadataStore(), run=1)
    assert rows(lake / "lake") == [{"id": 3, "name": "berlin", "city": "carol"}]


@pytest.mark.parametrize(
    ("head", "options", "names"),
    [
        (b"id,name\n1,a\n", {}, ["id", "name"]),
        (b'\xef\xbb\xbfid;"a;b"\n', {"sep": ";"}, ["id", "a;b"]),
        (b"\n\n id , x \n", {}, [" id ", " x "]),  # as Spark's header check sees them
        (b"id,x\n", {"SEP": "|", "Encoding": "utf-8"}, ["id,x"]),  # option keys in any case, as Spark takes them
        (b'id||"x"||y\n1||2||3\n', {"sep": "||"}, ["id", "x", "y"]),  # a separator of several characters
    ],
)
def test_the_header_line(head: bytes, options: dict[str, str], names: list[str]) -> None:
    assert header_of(head, options) == names


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(  # a ``.csv.gz`` file's header is its text's first line, not its compressed bytes
            {
                "a.csv.gz": gzip.compress(b"id,name,city\n1,alice,paris\n"),
                "b.csv.gz": gzip.compress(b"city,id,name\nrome,2,bob\n"),
            },
            id="compressed",
        ),
        pytest.param(  # what Excel writes: the mark before the first name is no part of it
            {
                "a.csv": b"\xef\xbb\xbfid,name,city\r\n1,alice,paris\r\n",
                "b.csv": b"\xef\xbb\xbfid,city,name\r\n2,rome,bob\r\n",
            },
            id="byte-order-mark",
        ),
    ],
)
def test_files_in_several_orders_are_read_by_their_headers_compressed_or_with_a_byte_order_mark(
    spark: Any, lake: Path, tmp_path: Path, files: dict[str, bytes]
) -> None:
    (tmp_path / "in").mkdir()
    for name, data in files.items():
        (tmp_path / "in" / name).write_bytes(data)
    spec = csv_job(tmp_path / "in", schema="id INT, name STRING, city STRING")
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert (summary["status"], summary["errors"]) == ("SUCCEEDED", 0), summary
    assert rows(lake / "lake") == [
        {"id": 1, "name": "alice", "city": "paris"},
        {"id": 2, "name": "bob", "city": "rome"},
    ]
