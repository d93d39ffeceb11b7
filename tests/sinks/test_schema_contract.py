"""A Delta sink's schema contract (``schema = evolve | freeze | rescue``) on real runs: a second
batch brings a new column or a value of another type, and the table ends as the contract says,
read back with delta-rs. A refused batch publishes nothing and keeps its watermark, so the run
after the contract is changed reads it again."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine.sinks.contract import Contract, SchemaContractError, drift, fits
from tests.commit.harness import run_here


def land(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> None:
    folder = tmp_path / "land"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def job(tmp_path: Path, schema: str, contract: str | None, *, mode: str = "append", extra: str = "") -> Path:
    jobs = tmp_path / "jobs"
    jobs.mkdir(exist_ok=True)
    keyed = "keys = [id]" if mode == "merge" else ""
    said = f"schema = {contract}" if contract else ""
    (jobs / "shaped.conf").write_text(
        f'sources.in {{ type = files, format = json, path = "{tmp_path / "land"}", schema = "{schema}" }}\n'
        f"sinks.out {{\n  type = delta\n  path = out\n  mode = {mode}\n  {keyed}\n  {said}\n  {extra}\n}}\n"
    )
    return jobs


def table(wh: Path) -> DeltaTable:
    return DeltaTable(str(wh / "out"))


def rows(wh: Path) -> list[dict[str, Any]]:
    return sorted(table(wh).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def first_batch(tmp_path: Path, contract: str | None, *, mode: str = "append") -> Path:
    wh = tmp_path / "wh"
    land(tmp_path, "a.json", [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}])
    code, summary = run_here(job(tmp_path, "id INT, amount INT", contract, mode=mode), wh, job="shaped")
    assert code == 0, summary
    return wh


# -- without Spark ------------------------------------------------------------------------------


def test_a_narrower_type_fits_a_wider_one_and_nothing_else_does() -> None:
    assert fits(IntegerType(), LongType()) and fits(ByteType(), IntegerType()) and fits(FloatType(), DoubleType())
    assert fits(IntegerType(), DoubleType()) and not fits(LongType(), DoubleType())
    assert fits(IntegerType(), DecimalType(10, 0)) and not fits(IntegerType(), DecimalType(9, 0))
    assert fits(DecimalType(5, 2), DecimalType(7, 3)) and not fits(DecimalType(5, 2), DecimalType(6, 1))
    assert fits(DateType(), TimestampNTZType()) and not fits(DateType(), TimestampType())
    assert fits(NullType(), StringType())
    assert not fits(LongType(), IntegerType()) and not fits(StringType(), IntegerType())
    found = drift(
        StructType([StructField("id", LongType()), StructField("amount", IntegerType())]),
        StructType(
            [StructField("ID", IntegerType()), StructField("amount", StringType()), StructField("n", ByteType())]
        ),
    )
    assert [f.name for f in found.new] == ["n"] and [f.name for f in found.widened] == ["id"]
    assert [(t.name, b.dataType) for t, b in found.incompatible] == [("amount", StringType())]


# -- the contract over small frames (Spark, no table) -------------------------------------------


def _table(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_nested_types_differing_only_in_nullability_are_the_same(spark: Any) -> None:
    batch = spark.createDataFrame([("a,b",)], "note STRING").select(F.split("note", ",").alias("tags"))
    assert batch.schema["tags"].dataType == ArrayType(StringType(), False)
    held = _table(StructField("tags", ArrayType(StringType(), True)))
    frame, evolves = Contract("freeze", "s", "/t").apply(batch, held)
    assert (frame, evolves) == (batch, False)


def test_rescue_keeps_every_value_a_cast_would_lose(spark: Any) -> None:
    batch = spark.createDataFrame(
        [("12.345", 3.7, True), ("7", 4.0, None), (None, None, False), ("x", None, None)],
        "amount STRING, ratio DOUBLE, flag BOOLEAN",
    )
    held = _table(
        StructField("amount", DecimalType(10, 2)), StructField("ratio", IntegerType()), StructField("flag", DateType())
    )
    frame, _ = Contract("rescue", "s", "/t").apply(batch, held)
    got = [
        (r["amount"], r["ratio"], r["flag"], json.loads(r["_rescued"]) if r["_rescued"] else None)
        for r in frame.collect()
    ]
    assert got == [
        (None, None, None, {"amount": "12.345", "ratio": "3.7", "flag": "true"}),
        (Decimal("7.00"), 4, None, None),
        (None, None, None, {"flag": "false"}),
        (None, None, None, {"amount": "x"}),
    ]


def test_rescue_refuses_a_batch_with_its_own_rescued_column_and_every_mode_a_missing_not_null_one(
    spark: Any,
) -> None:
    batch = spark.createDataFrame([(1, "x")], "id INT, _rescued STRING")
    with pytest.raises(SchemaContractError, match="has a `_rescued` column of its own"):
        Contract("rescue", "s", "/t").apply(batch, None)
    held = _table(StructField("id", IntegerType()), StructField("must", StringType(), nullable=False))
    for mode in ("evolve", "freeze", "rescue"):
        with pytest.raises(SchemaContractError, match="NOT NULL column `must` is not in the batch"):
            Contract(mode, "s", "/t").apply(batch.select("id"), held)  # type: ignore[arg-type]


def test_a_merge_lacking_a_column_needs_schema_evolution_to_keep_it(spark: Any) -> None:
    batch = spark.createDataFrame([(1, 2)], "id INT, a INT")
    held = _table(StructField("id", IntegerType()), StructField("a", IntegerType()), StructField("b", IntegerType()))
    assert Contract("evolve", "s", "/t", merge=True).apply(batch, held)[1] is True
    assert Contract("evolve", "s", "/t").apply(batch, held)[1] is False, "an append writes it as null"


# -- real runs ----------------------------------------------------------------------------------


def test_evolve_by_default_adds_a_new_column_and_casts_a_narrower_type_up(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, None)
    land(tmp_path, "b.json", [{"id": 3, "amount": 30, "note": "new"}])
    code, summary = run_here(job(tmp_path, "id TINYINT, amount INT, note STRING", None), wh, job="shaped")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert table(wh).schema().to_arrow().names == ["id", "amount", "note"]
    assert str(table(wh).to_pyarrow_table().schema.field("id").type) == "int32", "the table's type kept"
    assert rows(wh) == [
        {"id": 1, "amount": 10, "note": None},
        {"id": 2, "amount": 20, "note": None},
        {"id": 3, "amount": 30, "note": "new"},
    ]


def test_freeze_refuses_a_new_column_publishes_nothing_and_the_next_run_reads_it_again(
    spark: Any, tmp_path: Path
) -> None:
    wh = first_batch(tmp_path, "freeze")
    version = table(wh).version()
    land(tmp_path, "b.json", [{"id": 3, "amount": 30, "note": "new"}])
    code, summary = run_here(job(tmp_path, "id INT, amount INT, note STRING", "freeze"), wh, job="shaped")
    assert (code, summary["status"]) == (1, "FAILED")
    message = summary["dags"][0]["message"]
    assert "sink `out` (schema = freeze)" in message and "new column `note` (string)" in message, message
    assert table(wh).version() == version and len(rows(wh)) == 2, "nothing published"

    code, summary = run_here(job(tmp_path, "id INT, amount INT, note STRING", "evolve"), wh, job="shaped")
    assert (code, summary["status"], summary["records_read"]) == (0, "SUCCEEDED", 1), summary
    assert [r["note"] for r in rows(wh)] == [None, None, "new"]


def test_evolve_refuses_a_type_that_does_not_fit_naming_the_column(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, "evolve")
    land(tmp_path, "b.json", [{"id": 3, "amount": "lots"}])
    code, summary = run_here(job(tmp_path, "id INT, amount STRING", "evolve"), wh, job="shaped")
    assert (code, summary["status"]) == (1, "FAILED")
    message = summary["dags"][0]["message"]
    assert "column `amount` is int in the table, string in the batch" in message, message
    assert len(rows(wh)) == 2


def test_rescue_keeps_the_tables_columns_and_puts_what_does_not_fit_in_rescued(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, "rescue")
    assert rows(wh)[0] == {"id": 1, "amount": 10, "_rescued": None}
    land(tmp_path, "b.json", [{"id": 3, "amount": "lots", "note": "n3"}, {"id": 4, "amount": "40"}])
    code, summary = run_here(job(tmp_path, "id INT, amount STRING, note STRING", "rescue"), wh, job="shaped")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert table(wh).schema().to_arrow().names == ["id", "amount", "_rescued"], "no new column"
    got = rows(wh)
    assert got[2]["amount"] is None and json.loads(got[2]["_rescued"]) == {"amount": "lots", "note": "n3"}
    assert got[3] == {"id": 4, "amount": 40, "_rescued": None}, "a value that fits is cast, nothing rescued"


def test_a_merge_sink_evolves_too(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, None, mode="merge")
    land(tmp_path, "b.json", [{"id": 2, "amount": 21, "note": "updated"}, {"id": 3, "amount": 30, "note": "new"}])
    code, summary = run_here(job(tmp_path, "id INT, amount INT, note STRING", None, mode="merge"), wh, job="shaped")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert rows(wh) == [
        {"id": 1, "amount": 10, "note": None},
        {"id": 2, "amount": 21, "note": "updated"},
        {"id": 3, "amount": 30, "note": "new"},
    ]


def test_an_overwrite_that_replaces_the_schema_is_not_held_by_a_contract(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, "freeze")
    land(tmp_path, "b.json", [{"id": 3, "amount": "lots"}])
    replacing = "options { overwriteSchema = true }"
    jobs = job(tmp_path, "id INT, amount STRING", "freeze", mode="overwrite", extra=replacing)
    code, summary = run_here(jobs, wh, job="shaped")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert rows(wh) == [{"id": 3, "amount": "lots"}]


def test_a_merge_batch_lacking_a_column_keeps_the_tables_values(spark: Any, tmp_path: Path) -> None:
    wh = first_batch(tmp_path, None, mode="merge")
    land(tmp_path, "b.json", [{"id": 2}, {"id": 3}])
    code, summary = run_here(job(tmp_path, "id INT", None, mode="merge"), wh, job="shaped")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert rows(wh) == [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}, {"id": 3, "amount": None}]


def test_an_unknown_contract_is_a_config_error_naming_the_key(spark: Any, tmp_path: Path) -> None:
    land(tmp_path, "a.json", [{"id": 1, "amount": 10}])
    code, summary = run_here(job(tmp_path, "id INT, amount INT", "loose"), tmp_path / "wh", job="shaped")
    assert (code, summary["status"]) == (2, "CONFIG_ERROR")
    assert "sinks.out.schema" in summary["message"], summary["message"]


@pytest.mark.parametrize("contract", ["evolve", "freeze", "rescue"])
def test_every_mode_is_accepted_by_the_config(contract: str, tmp_path: Path) -> None:
    from engine.sinks.conf import DeltaSinkConf

    conf = DeltaSinkConf.model_validate({"type": "delta", "path": "out", "schema": contract})
    assert conf.schema_ == contract


def test_a_refusal_throws_away_what_the_other_sinks_staged(spark: Any, tmp_path: Path) -> None:
    """Nothing of a refused batch stays behind: the sinks staged before the refusing one are
    discarded with it (their staging directories), and the rerun stages them again."""
    wh = first_batch(tmp_path, "freeze")
    land(tmp_path, "b.json", [{"id": 3, "amount": 30, "note": "new"}])
    jobs = job(tmp_path, "id INT, amount INT, note STRING", "freeze")
    conf = jobs / "shaped.conf"
    conf.write_text("sinks.a_side { type = parquet, path = side }\n" + conf.read_text())  # staged first
    code, summary = run_here(jobs, wh, job="shaped")
    assert (code, summary["status"]) == (1, "FAILED"), summary
    assert "schema = freeze" in summary["dags"][0]["message"]
    assert not list(wh.rglob("_engine_staging")), "a refused batch left staged files"
    assert not list(wh.glob("side/*.parquet")), "nothing published"
