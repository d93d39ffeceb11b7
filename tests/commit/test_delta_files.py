"""A Delta batch written by Delta's writer at staging and committed by the commit step: invisible
until committed, committed once, and rewritten through Delta's writer when the table changed in
between. Every table is read back with ``deltalake`` (no Spark)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from engine.commit.batch import BatchRef
from engine.commit.delta_files import WrittenFiles, commit_files, read_staged, staged_schema, write_files
from engine.commit.steps import CommitStep, DeltaWrite, StepContext, StepError
from engine.sinks.conf import DeltaSinkConf
from engine.sinks.delta import DeltaSink
from engine.state.store import InMemoryMetadataStore
from engine.storage.hadoop import HadoopFs

APP = "engine:e:j:d:lake"


def ctx(spark: Any, *, fresh: bool) -> StepContext:
    return StepContext(spark, InMemoryMetadataStore(), HadoopFs(spark), fresh=fresh)


def orders(spark: Any, start: int, stop: int) -> Any:
    return spark.range(start, stop).selectExpr("id", "cast(id % 3 as string) as day", "id * 1.5 as amount")


def step_for(table: Path, written: WrittenFiles | None, *, mode: str = "append", batch: int = 1) -> DeltaWrite:
    return DeltaWrite(
        "lake",
        str(table),
        "",
        mode,
        APP,
        batch,
        -1,
        partition_by=["day"],
        user_metadata=json.dumps({"engine": {"batch": batch}}),
        written=written.to_json() if written else {},
    )


def ids(table: Path) -> list[int]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist())


def test_a_new_table_is_written_at_staging_and_appears_only_when_committed(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    written = write_files(orders(spark, 0, 9), str(table), ["day"], mode="append", options={})
    assert written is not None and written.metadata and not written.table_id
    assert {json.loads(a)["add"]["partitionValues"]["day"] for a in written.actions} == {"0", "1", "2"}
    assert all(Path(p).is_file() and "/day=" in p for p in written.paths(str(table)))
    assert not (table / "_delta_log").exists()  # no reader sees them yet
    stats = [json.loads(json.loads(a)["add"]["stats"]) for a in written.actions]
    assert sum(s["numRecords"] for s in stats) == 9  # Delta's own statistics, for data skipping

    step = step_for(table, WrittenFiles.from_json(json.loads(json.dumps(written.to_json()))))
    assert CommitStep.from_json(json.loads(json.dumps(step.to_json()))) == step
    assert not step.verify(ctx(spark, fresh=True))
    step.execute(ctx(spark, fresh=True))
    assert step.verify(ctx(spark, fresh=True))
    step.execute(ctx(spark, fresh=False))  # a replay: the table holds the txn, nothing is added
    dt = DeltaTable(str(table))
    assert (dt.version(), ids(table)) == (0, list(range(9)))
    assert dt.metadata().partition_columns == ["day"]
    assert json.loads(dt.history(1)[0]["userMetadata"]) == {"engine": {"batch": 1}}
    assert all(f.nullable for f in dt.schema().fields)  # as Delta's writer stores a new table
    with pytest.raises(StepError, match="Delta skipped the write of batch 1"):
        step.execute(ctx(spark, fresh=True))


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_an_existing_table_gets_the_files_or_is_replaced_by_them(spark: Any, tmp_path: Path, mode: str) -> None:
    table = tmp_path / "t"
    orders(spark, 0, 5).write.format("delta").partitionBy("day").save(str(table))
    before = DeltaTable(str(table)).schema().to_json()
    reordered = orders(spark, 5, 8).select("amount", "day", "id")
    written = write_files(reordered, str(table), [], mode=mode, options={})
    assert written is not None and written.table_id and not written.metadata
    orders(spark, 100, 101).write.format("delta").mode("append").save(str(table))  # another writer, meanwhile
    assert commit_files(
        spark, str(table), written, mode=mode, app_id=APP, batch=3, partition_by=[], user_metadata=""
    ) == ("committed")
    expected = {"append": [0, 1, 2, 3, 4, 5, 6, 7, 100], "overwrite": [5, 6, 7]}[mode]
    assert DeltaTable(str(table)).schema().to_json() == before  # the columns came in another order
    assert ids(table) == expected
    again = commit_files(spark, str(table), written, mode=mode, app_id=APP, batch=3, partition_by=[], user_metadata="")
    assert again == "held" and ids(table) == expected


def jobs_of(spark: Any, group: str, action: Any) -> tuple[Any, int]:
    """``action()``'s result and the number of Spark jobs it ran."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        out = action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return out, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize("checksum", ["kept", "deleted"])
def test_whether_a_table_holds_a_batch_is_read_from_its_checksum_file_without_a_spark_job(
    spark: Any, tmp_path: Path, checksum: str
) -> None:
    """Delta's ``txnVersion`` builds the table's state with Spark jobs on every commit; the checksum
    file of the version read lists the same transactions. Without that file, Delta's answer."""
    table = tmp_path / "t"
    orders(spark, 0, 3).write.format("delta").save(str(table))

    def staged(batch: int) -> WrittenFiles:
        written = write_files(orders(spark, batch * 10, batch * 10 + 2), str(table), [], mode="append", options={})
        assert written is not None
        return written

    def commit(written: WrittenFiles, batch: int, app: str = APP) -> str:
        return commit_files(
            spark, str(table), written, mode="append", app_id=app, batch=batch, partition_by=[], user_metadata=""
        )

    assert (commit(staged(1), 1), commit(staged(5), 5, app="engine:other")) == ("committed", "committed")
    if checksum == "deleted":
        (table / "_delta_log" / f"{DeltaTable(str(table)).version():020d}.crc").unlink()
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # its snapshot read the file
    again, older = staged(1), staged(4)

    def both() -> list[str]:
        return [commit(again, 1), commit(older, 4, app="engine:other")]

    verdicts, jobs = jobs_of(spark, f"held-{checksum}", both)
    assert verdicts == ["held", "held"]  # batch 1 of APP, and 4 < 5 of the other application
    assert (jobs == 0) == (checksum == "kept")
    assert commit(staged(2), 2) == "committed"
    assert ids(table) == [0, 1, 2, 10, 11, 20, 21, 50, 51]


@pytest.mark.parametrize(
    ("why", "frame", "mode", "options"),
    [
        pytest.param("merge", "same", "merge", {}, id="merge"),
        pytest.param("writer options", "same", "append", {"mergeSchema": "true"}, id="options"),
        pytest.param("a new column", "wider", "append", {}, id="schema-change"),
        pytest.param("another type", "retyped", "append", {}, id="column-type"),
        pytest.param("a name Delta refuses", "spaced", "append", {}, id="bad-name"),
    ],
)
def test_writes_that_need_deltas_full_writer_are_not_staged_this_way(
    spark: Any, tmp_path: Path, why: str, frame: str, mode: str, options: dict[str, str]
) -> None:
    table = tmp_path / "t"
    orders(spark, 0, 3).write.format("delta").save(str(table))
    df = {
        "same": orders(spark, 3, 6),
        "wider": orders(spark, 3, 6).selectExpr("*", "'x' as extra"),
        "retyped": orders(spark, 3, 6).withColumn("amount", F.col("amount").cast("float")),
        "spaced": orders(spark, 3, 6).withColumnRenamed("amount", "the amount"),
    }[frame]
    target = str(table) if frame != "spaced" else str(tmp_path / "new")
    before = sorted(table.rglob("*.parquet"))
    assert write_files(df, target, [], mode=mode, options=options) is None, why
    assert sorted(table.rglob("*.parquet")) == before  # nothing written
    assert not (tmp_path / "new").exists()


def test_a_table_changed_before_publishing_gets_the_batch_through_deltas_writer(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    orders(spark, 0, 3).write.format("delta").partitionBy("day").save(str(table))
    written = write_files(orders(spark, 3, 6), str(table), ["day"], mode="append", options={})
    assert written is not None
    spark.sql(f"ALTER TABLE delta.`{table}` ADD COLUMNS (note STRING)")  # someone altered it meanwhile
    step = step_for(table, written)
    step.execute(ctx(spark, fresh=True))
    assert ids(table) == list(range(6))
    assert step.verify(ctx(spark, fresh=False))
    assert not any(Path(p).exists() for p in written.paths(str(table)))  # the staged copies are gone

    dropped = tmp_path / "dropped"
    orders(spark, 0, 3).write.format("delta").save(str(dropped))
    written = write_files(orders(spark, 3, 6), str(dropped), [], mode="append", options={})
    assert written is not None
    shutil.rmtree(dropped / "_delta_log")  # the table was dropped; its staged files are still there
    step_for(dropped, written).execute(ctx(spark, fresh=True))
    assert ids(dropped) == [3, 4, 5]


def test_a_new_table_created_by_another_writer_meanwhile_takes_the_files(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    written = write_files(orders(spark, 3, 6), str(table), ["day"], mode="append", options={})
    assert written is not None
    orders(spark, 0, 3).write.format("delta").partitionBy("day").save(str(table))
    assert (
        commit_files(
            spark, str(table), written, mode="append", app_id=APP, batch=1, partition_by=["day"], user_metadata=""
        )
        == "committed"
    )
    assert ids(table) == list(range(6))

    other = tmp_path / "other"  # created meanwhile, partitioned otherwise: the files do not fit its folders
    written = write_files(orders(spark, 3, 6), str(other), ["day"], mode="append", options={})
    assert written is not None
    orders(spark, 0, 3).write.format("delta").save(str(other))
    assert (
        commit_files(
            spark, str(other), written, mode="append", app_id=APP, batch=1, partition_by=["day"], user_metadata=""
        )
        == "unfit"
    )
    assert ids(other) == [0, 1, 2]


def test_a_replay_refuses_files_removed_before_publishing(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    written = write_files(orders(spark, 0, 6), str(table), ["day"], mode="append", options={})
    assert written is not None
    Path(written.paths(str(table))[1]).unlink()  # VACUUM with a short retention, say
    with pytest.raises(StepError, match=r"sink `lake`: file .*day=.*parquet, written for batch 1, is missing"):
        step_for(table, written).execute(ctx(spark, fresh=False))
    assert not (table / "_delta_log").exists()  # nothing half-published


def test_the_delta_sink_stages_a_plain_write_in_the_table_and_the_rest_as_parquet(spark: Any, tmp_path: Path) -> None:
    batch = BatchRef("j", "d", 4, epoch="e")
    fs = HadoopFs(spark)
    plain = DeltaSink(DeltaSinkConf(type="delta", path=str(tmp_path / "a")), name="lake", key="sinks.lake")
    staged = plain.stage(orders(spark, 0, 4), batch, fs)
    step = staged.steps[0]
    assert isinstance(step, DeltaWrite) and staged.staging is None and step.written and not step.staging
    assert not (tmp_path / "a" / "_engine_staging").exists()

    conf = DeltaSinkConf(type="delta", path=str(tmp_path / "b"), mode="merge", keys=["id"])
    merged = DeltaSink(conf, name="lake", key="sinks.lake").stage(orders(spark, 0, 4), batch, fs)
    step = merged.steps[0]
    assert isinstance(step, DeltaWrite) and not step.written
    assert merged.staging and Path(merged.staging).is_dir() and "_engine_staging" in merged.staging


def test_abandoning_a_batch_deletes_the_files_it_wrote_unless_committed(spark: Any, tmp_path: Path) -> None:
    from engine.commit import operations
    from engine.commit.log import CommitLog
    from engine.commit.sequence import CommitSequence
    from engine.state.store import LIVE

    table, kept = tmp_path / "t", tmp_path / "kept"
    dropped = write_files(orders(spark, 0, 6), str(table), ["day"], mode="append", options={})
    committed = write_files(orders(spark, 0, 2), str(kept), [], mode="append", options={})
    assert dropped is not None and committed is not None
    done = step_for(kept, committed)
    done.partition_by = []
    done.execute(ctx(spark, fresh=True))  # this sink's step ran before the batch got stuck
    store = InMemoryMetadataStore()
    log = CommitLog(store, "j", "r1")
    log.write(log.sequence(CommitSequence("j", "d", LIVE, 1, [done, step_for(table, dropped)], ["urn:a"])))
    operations.abandon(log, operations.target(log, {}, dag="d", batch=1), "re-read", spark=spark, state=store)
    assert not any(Path(p).exists() for p in dropped.paths(str(table)))
    assert all(Path(p).exists() for p in committed.paths(str(kept))) and ids(kept) == [0, 1]


def test_staged_parquet_is_read_back_with_the_schema_its_files_hold_without_a_spark_job(
    spark: Any, tmp_path: Path
) -> None:
    """A commit step keeps the schema of the Parquet it staged (:func:`staged_schema`): reading the
    files back with it gives the frame Spark's own reading gives, and runs no Spark job, where
    Spark infers the schema from the files' footers with one."""
    frame = spark.range(3).selectExpr(
        "id",
        "cast(id as decimal(12, 2)) as amount",
        "named_struct('day', cast('2026-01-01' as date), 'tags', array('a', null)) as nested",
        "map('k', id) as attrs",
        "timestamp_ntz'2026-01-02 03:04:05' as at",
        "coalesce(cast(id as string), 'x') as never_null",
    )
    assert not frame.schema["never_null"].nullable  # the file says nullable: so must the kept schema
    staging = str(tmp_path / "staged")
    frame.write.parquet(staging)
    kept = staged_schema(frame)

    inferred, inferring = jobs_of(spark, "staged-inferred", lambda: spark.read.parquet(staging))
    read, reading = jobs_of(spark, "staged-kept", lambda: read_staged(spark, staging, kept))
    assert (inferring, reading) == (1, 0)
    assert read.schema == inferred.schema
    assert sorted(read.collect()) == sorted(inferred.collect()) == sorted(frame.collect())
    old_step = read_staged(spark, staging, "")  # a step written before the schema was kept
    assert old_step.schema == inferred.schema


def test_a_small_tables_rows_are_read_from_the_files_its_checksum_lists(spark: Any, tmp_path: Path) -> None:
    """The engine's tombstones are read as the Parquet files their checksum file lists: the rows
    Delta's own reading gives, without the Spark jobs that build a table's state from its log in
    each process. Where that would miss something (no checksum, as ``deltalake`` writes; deletion
    vectors; partition folders), :func:`read_listed` declines and the table is read as Delta."""
    from pyspark.sql.types import StructType

    from engine.commit.delta_files import _Delta, read_listed

    table = str(tmp_path / "t")
    orders(spark, 0, 5).write.format("delta").save(table)
    orders(spark, 5, 8).write.format("delta").mode("append").save(table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 6")  # rewrites a file: the listing follows
    _Delta(spark).forget(table)  # a new process: no state of the table in memory
    listed, listing = jobs_of(spark, "listed", lambda: sorted(read_listed(spark, table).collect()))  # type: ignore[union-attr]
    _Delta(spark).forget(table)
    delta, reading = jobs_of(spark, "as-delta", lambda: sorted(spark.read.format("delta").load(table).collect()))
    assert listed == delta and [r.id for r in listed] == [0, 1, 2, 3, 4, 5, 7]
    assert listing < reading, (listing, reading)

    empty = str(tmp_path / "empty")
    spark.createDataFrame([], StructType.fromJson(orders(spark, 0, 1).schema.jsonValue())).write.format("delta").save(
        empty
    )
    assert read_listed(spark, empty).collect() == []  # type: ignore[union-attr]

    import pyarrow as pa
    from deltalake import write_deltalake

    unlisted = str(tmp_path / "by-deltalake")
    write_deltalake(unlisted, pa.table({"id": pa.array([1, 2], pa.int64())}))
    assert read_listed(spark, unlisted) is None  # no checksum file

    parted = str(tmp_path / "parted")
    orders(spark, 0, 3).write.format("delta").partitionBy("day").save(parted)
    assert read_listed(spark, parted) is None  # the partition values are in folders, not files

    vectors = str(tmp_path / "vectors")
    orders(spark, 0, 6).coalesce(1).write.format("delta").option("delta.enableDeletionVectors", "true").save(vectors)
    spark.sql(f"DELETE FROM delta.`{vectors}` WHERE id = 2")
    assert read_listed(spark, vectors) is None  # a file's deleted rows are in a vector beside it

    patterned = str(tmp_path / "runs[1]")  # Spark would read the files' paths as glob patterns
    orders(spark, 0, 3).write.format("delta").save(patterned)
    assert read_listed(spark, patterned) is None
    assert spark.read.format("delta").load(patterned).count() == 3
