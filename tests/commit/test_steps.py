"""Commit steps on real files and real Delta tables: verify, execute, repeat, JSON round trips."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.commit import plan_codec
from engine.commit.steps import CommitStep, DeltaWrite, RenameFiles, StepContext, StepError
from engine.sources.delta import Range
from engine.sources.files import FileEntry
from engine.sources.workunits import Size, WorkUnit
from engine.state.store import InMemoryMetadataStore
from engine.state.watermarks import FileWatermark, LongWatermark, TimestampWatermark
from engine.storage.hadoop import HadoopFs


def ctx(spark: Any, *, fresh: bool = False) -> StepContext:
    return StepContext(spark, InMemoryMetadataStore(), HadoopFs(spark), fresh=fresh)


def test_steps_round_trip_through_json() -> None:
    step = DeltaWrite("lake", "/t", "/t/_engine_staging/b1", "merge", "app", 4, 2, keys=["id"], options={"a": "1"})
    again = CommitStep.from_json(json.loads(json.dumps(step.to_json())))
    assert again == step
    changes = {"keys": ["id"], "sequence_by": "seq", "scd": 2, "soft_delete": False}
    step = DeltaWrite("lake", "/t", "/t/_engine_staging/b1", "apply_changes", "app", 4, 2, changes=changes)
    assert CommitStep.from_json(json.loads(json.dumps(step.to_json()))) == step
    with pytest.raises(StepError, match="unknown commit step"):
        CommitStep.from_json({"kind": "teleport"})


def test_work_units_round_trip_through_json() -> None:
    units = [
        WorkUnit(
            "file:/in/a",
            None,
            FileWatermark(5, "file:/in/a/x.json", ("file:/in/a/w.json",)),
            Size(None, 10, 1),
            payload=[FileEntry("file:/in/a/x.json", 10, 5, "file:/in/a")],
            note="n",
        ),
        WorkUnit("delta:/t", LongWatermark(3), LongWatermark(7), payload=Range("appends", 4, 7, ("p1.parquet",))),
        WorkUnit(
            "jdbc:pg/t",
            TimestampWatermark(datetime(2026, 1, 1)),
            TimestampWatermark(datetime(2026, 1, 2)),
            payload=(TimestampWatermark(datetime(2026, 1, 1)), TimestampWatermark(datetime(2026, 1, 2))),
        ),
        WorkUnit.carry("file:/in/b", LongWatermark(1), "no new files"),
    ]
    assert plan_codec.decode(json.loads(json.dumps(plan_codec.encode(units)))) == units


def test_rename_is_idempotent_and_refuses_a_lost_staging(spark: Any, tmp_path: Path) -> None:
    staging, target = tmp_path / "t" / "_engine_staging" / "b1", tmp_path / "t"
    spark.range(10).repartition(3).write.parquet(str(staging))
    files = [[rel, size] for rel, size in HadoopFs(spark).files(str(staging))]
    assert len(files) == 3 and all(not rel.startswith("_") for rel, _ in files)
    step = RenameFiles("pq", str(staging), str(target), files)
    assert not step.verify(ctx(spark))
    done = []
    c = ctx(spark)
    c.midway = lambda: done.append(len(list(target.glob("*.parquet"))))
    step.execute(c)
    assert done == [1]  # halfway: one of three moved
    assert step.verify(ctx(spark))
    step.execute(ctx(spark))  # again: nothing to do
    assert len(list(target.glob("part-*.parquet"))) == 3
    assert sorted(spark.read.parquet(str(target)).toPandas()["id"]) == list(range(10))

    lost = RenameFiles("pq", str(staging), str(tmp_path / "elsewhere"), files)
    with pytest.raises(StepError, match=r"staged file .* is missing"):
        lost.execute(ctx(spark))


@pytest.mark.parametrize("mode", ["append", "overwrite", "merge"])
def test_a_delta_write_commits_once_however_often_it_runs(spark: Any, tmp_path: Path, mode: str) -> None:
    table, staging = tmp_path / "t", tmp_path / "t" / "_engine_staging" / "b2"
    spark.range(5).write.format("delta").save(str(table))
    spark.range(3, 8).write.parquet(str(staging))
    step = DeltaWrite(
        "lake",
        str(table),
        str(staging),
        mode,
        "engine:e:j:d:lake",
        2,
        0,
        keys=["id"],
        user_metadata='{"engine": {"batch": 2}}',
    )
    assert not step.verify(ctx(spark))
    step.execute(ctx(spark, fresh=True))
    assert step.verify(ctx(spark))
    step.execute(ctx(spark))  # a replay: Delta skips the txn version it already has
    dt = DeltaTable(str(table))
    assert dt.version() == 1
    ids = sorted(dt.to_pyarrow_table().column("id").to_pylist())
    assert (
        ids == {"append": [0, 1, 2, 3, 3, 4, 4, 5, 6, 7], "overwrite": [3, 4, 5, 6, 7], "merge": list(range(8))}[mode]
    )
    assert json.loads(dt.history(1)[0]["userMetadata"]) == {"engine": {"batch": 2}}

    with pytest.raises(StepError, match="Delta skipped the write of batch 2"):
        step.execute(ctx(spark, fresh=True))  # a fresh sequence whose batch the table already has


def test_a_delta_write_is_verified_from_a_checkpoint_once_its_commit_is_cleaned_up(spark: Any, tmp_path: Path) -> None:
    table, staging = tmp_path / "t", tmp_path / "t" / "_engine_staging" / "b2"
    spark.range(5).write.format("delta").save(str(table))
    spark.range(3).write.parquet(str(staging))
    step = DeltaWrite("lake", str(table), str(staging), "append", "engine:e:j:d:lake", 2, 0)
    step.execute(ctx(spark, fresh=True))  # version 1 carries the txn
    for _ in range(9):
        spark.range(1).write.format("delta").mode("append").save(str(table))
    log = table / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    for version in range(10):  # what Delta's log cleanup removes once a checkpoint covers it
        (log / f"{version:020d}.json").unlink()
    assert step.verify(ctx(spark))
    assert not DeltaWrite("lake", str(table), str(staging), "append", "engine:e:j:d:lake", 3, 0).verify(ctx(spark))
    assert not DeltaWrite("lake", str(table), str(staging), "append", "engine:other", 2, 0).verify(ctx(spark))
