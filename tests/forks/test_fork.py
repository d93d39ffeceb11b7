"""Forks: valid, error and overlapping named branches from one read of the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from engine.converters.frame import DATASET
from engine.errors import ConfigError
from engine.plugins import PluginEntry
from engine.sources import SOURCES
from engine.sources.base import PlanContext, Source
from engine.sources.conf import SourceConf
from engine.sources.workunits import WorkUnit
from tests.helpers import json_job, run_dict, write_jsonl

ROWS = [{"id": i, "amount": a} for i, a in enumerate([5, 50, 500, 5000, -1])]


def test_named_branches_overlap_and_take_only_valid_records(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", ROWS)
    job = json_job(
        src,
        [{"type": "check", "expr": "amount >= 0"}],
        forks={"big": "amount >= 500", "huge": "amount >= 5000", "none": "amount > 1e9"},
        sinks={
            "all": {"type": "delta", "path": "all"},
            "big": {"type": "parquet", "path": "big", "from": "big"},
            "huge": {"type": "json", "path": "huge", "from": "huge"},
            "none": {"type": "csv", "path": "none", "from": "none"},
            "bad": {"type": "avro", "path": "bad", "from": "error"},
        },
    )
    result, _ = run_dict(spark, job, lake)
    assert result.summary()["sinks"] == {"t.all": 4, "t.big": 2, "t.huge": 1, "t.none": 0, "t.bad": 1}
    assert sorted(r["id"] for r in DeltaTable(str(lake / "all")).to_pyarrow_table().to_pylist()) == [0, 1, 2, 3]
    assert sorted(pq.read_table(lake / "big").column("id").to_pylist()) == [2, 3]
    assert spark.read.json(str(lake / "huge")).collect()[0]["id"] == 3
    bad = spark.read.format("avro").load(str(lake / "bad")).collect()
    assert [(r["step"], r["job"], r["run_id"]) for r in bad] == [("check", "t", "run-1")]


class CountedConf(SourceConf):
    type: Literal["counted"] = "counted"
    rows: int


class CountedSource(Source):
    """A test source that counts, with an accumulator, every record it produces."""

    Conf = CountedConf
    produced: ClassVar[Any] = None

    def plan(self, spark: Any, ctx: PlanContext) -> list[WorkUnit]:
        return [WorkUnit(dataset="counted", low=None, high=None)]

    def schema(self, spark: Any, units: list[WorkUnit] | None, ctx: PlanContext | None = None) -> Any:
        from pyspark.sql.types import StructType

        return StructType.fromDDL("id INT, amount INT")

    def read(self, spark: Any, units: list[WorkUnit], schema: Any) -> Any:
        acc = CountedSource.produced = spark.sparkContext.accumulator(0)
        n = self.conf.rows  # type: ignore[attr-defined]

        def produce(i: int) -> tuple[int, int]:
            acc.add(1)
            return (i, i * 10)

        rows = spark.sparkContext.parallelize(range(n), 2).map(produce)
        return spark.createDataFrame(rows, schema).withColumn(DATASET, F.lit("counted"))


@pytest.mark.parametrize(
    ("persist", "reads"), [pytest.param("DISK_ONLY", 1, id="persisted"), pytest.param("NONE", 3, id="none")]
)
def test_the_source_is_read_once(spark: Any, lake: Path, persist: str, reads: int) -> None:
    """Two sinks, a custom branch and the error table, one read of the source when persisted
    (without persisting, each of the three actions reads it again: the test can fail; the counts
    are taken while the first sink writes, not by an action of their own)."""
    SOURCES.register("counted", PluginEntry(CountedConf, f"{__name__}:CountedSource"))
    job = {
        "sources": {"c": {"type": "counted", "rows": 100}},
        "converters": [{"type": "check", "expr": "amount < 900"}],
        "forks": {"big": "amount >= 500"},
        "sinks": {"a": {"type": "delta", "path": "a"}, "b": {"type": "parquet", "path": "b", "from": "big"}},
        "persist": persist,
    }
    result, _ = run_dict(spark, job, lake)
    assert result.summary()["sinks"] == {"t.a": 90, "t.b": 40}
    assert CountedSource.produced.value == 100 * reads


def test_a_branch_predicate_that_does_not_analyse_is_a_config_error(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", ROWS)
    job = json_job(src, [], forks={"big": "amout > 5"}, source={"schema": "id INT, amount INT"})
    with pytest.raises(ConfigError, match="branch `big`") as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.forks.big"
    assert list(lake.iterdir()) == []


@pytest.mark.parametrize(
    ("schema", "found"),
    [pytest.param("id INT, amount INT", "int", id="declared-schema"), pytest.param(None, "bigint", id="inferred")],
)
def test_a_branch_predicate_that_is_not_boolean_is_a_config_error(
    spark: Any, lake: Path, schema: str | None, found: str
) -> None:
    """``amount >> 6`` (a shift, meant as ``>``) was cast to boolean: every non-zero row took the branch."""
    src = write_jsonl(lake.parent / "in" / "rows.json", ROWS)
    job = json_job(src, [], forks={"big": "amount >> 6"}, source={"schema": schema} if schema else {})
    with pytest.raises(ConfigError, match=f"branch `big`: `amount >> 6` is of type {found}, not boolean") as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.forks.big"
    assert list(lake.iterdir()) == []
