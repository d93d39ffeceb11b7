"""Metadata tables are tidied as they grow: compacted into one file (and, with delta-rs,
checkpointed), every row kept, also rows another writer appended meanwhile; a failed tidy is a
warning and the append stands. Checked with the other reader (Spark for delta-rs, delta-rs for
Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.state.delta_table import MetaTable, RustMetaTable

DDL = "job STRING, n BIGINT"


def make(spark: Any, path: Path, io: str) -> MetaTable:
    kind = RustMetaTable if io == "delta-rs" else MetaTable
    table = kind(spark, str(path), DDL, version=1, what="test")
    MetaTable.ensure(table)  # created through Spark, as the store does
    table.tidy_at = 5
    return table


def spark_rows(spark: Any, path: Path) -> list[tuple[str, int]]:
    return sorted((r["job"], r["n"]) for r in spark.read.format("delta").load(str(path)).collect())


def rs_rows(path: Path) -> list[tuple[str, int]]:
    data = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(data.column("job").to_pylist(), data.column("n").to_pylist(), strict=True))


@pytest.mark.parametrize("io", ["delta-rs", "spark"])
def test_a_growing_table_is_compacted_and_keeps_every_row(
    spark: Any, lake: Path, io: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = lake / "_engine" / "grows"
    table = make(spark, path, io)
    with caplog.at_level("INFO", logger="engine.state.delta_table"):
        for n in range(12):
            table.append([{"job": f"j{n % 3}", "n": n}])

    expected = sorted((f"j{n % 3}", n) for n in range(12))
    assert (spark_rows(spark, path) if io == "delta-rs" else rs_rows(path)) == expected
    assert sorted((r["job"], r["n"]) for r in table.rows()) == expected
    assert sorted(r["n"] for r in table.rows(job="j1")) == [1, 4, 7, 10]
    files = DeltaTable(str(path)).file_uris()
    assert len(files) < 5, f"12 appends left {len(files)} files"
    operations = [h["operation"] for h in DeltaTable(str(path)).history()]
    assert operations.count("OPTIMIZE") == 2  # at 5 files, then at 1 + 4 more
    tidied = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tidied the test table")]
    assert len(tidied) == 2 and "5 file(s) into 1" in tidied[0]
    if io == "delta-rs":
        assert list((path / "_delta_log").glob("*.checkpoint.parquet")), "the next process opens from a checkpoint"


def test_rows_another_writer_appends_meanwhile_survive_the_compaction(spark: Any, lake: Path) -> None:
    path = lake / "_engine" / "shared"
    mine, theirs = make(spark, path, "delta-rs"), make(spark, path, "delta-rs")
    theirs.tidy_at = 1000
    for n in range(5):  # interleaved: mine tidies at its fifth append, its handle a commit behind
        theirs.append([{"job": "theirs", "n": n}])
        mine.append([{"job": "mine", "n": n}])
    theirs.append([{"job": "theirs", "n": 5}])

    assert spark_rows(spark, path) == sorted([("mine", n) for n in range(5)] + [("theirs", n) for n in range(6)])
    assert "OPTIMIZE" in [h["operation"] for h in DeltaTable(str(path)).history()]


@pytest.mark.parametrize("io", ["delta-rs", "spark"])
def test_a_failed_tidy_is_a_warning_and_the_append_stands(
    spark: Any, lake: Path, io: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = lake / "_engine" / "untidy"
    table = make(spark, path, io)

    def fail() -> None:
        raise OSError("No space left on device")

    table._tidy = fail  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="engine.state.delta_table"):
        for n in range(7):
            table.append([{"job": "j", "n": n}])

    assert rs_rows(path) == [("j", n) for n in range(7)]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, "tried once at the limit, then not again until another `tidy_at` appends"
    assert str(path) in warned[0] and "No space left on device" in warned[0]
