"""The metadata-store contracts, one per narrow store (state, status, commit log), run against the
in-memory twin and the Delta store, which implement all three; the Delta tables are also read back
with delta-rs."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from engine.state.status import Status
from engine.state.store import (
    LIVE,
    CheckpointChange,
    CommitLogStore,
    DatasetState,
    FileRead,
    FlowStatusRow,
    InMemoryMetadataStore,
    JobStatusRow,
    LogRow,
    MetadataStore,
    PinnedSchema,
    StateStore,
    StatusStore,
)
from engine.state.watermarks import FileWatermark, LongWatermark, TimestampWatermark

T0 = datetime(2026, 11, 1, 10, 0, 0)


def state(dataset: str, mark: Any, minute: int, *, dag: str = "d", scope: str = LIVE, job: str = "j") -> DatasetState:
    return DatasetState(job, dag, scope, dataset, mark, f"r{minute}", T0 + timedelta(minutes=minute))


def status(run: str, dataset: str, minute: int) -> JobStatusRow:
    at = T0 + timedelta(minutes=minute)
    return JobStatusRow(run, "j", "d", LIVE, dataset, Status.COMMITTED, "", 5, 50, 0.5, "1", "2", at, at)


class StateStoreContract:
    """Every :class:`StateStore` passes these."""

    def store(self) -> StateStore:
        raise NotImplementedError

    def test_the_newest_row_per_dataset_wins_and_scopes_and_dags_are_separate(self) -> None:
        store = self.store()
        store.save_state([state("a", LongWatermark(1), 1), state("b", TimestampWatermark(T0), 1)])
        store.save_state([state("a", LongWatermark(7), 2)])
        store.save_state([state("a", LongWatermark(99), 3, scope="backfill:1..5"), state("a", None, 3, dag="other")])
        store.save_state([state("a", LongWatermark(5), 4, job="another")])
        live = store.load_state("j", "d")
        assert {k: v.watermark for k, v in live.items()} == {"a": LongWatermark(7), "b": TimestampWatermark(T0)}
        assert store.load_state("j", "d", "backfill:1..5")["a"].watermark == LongWatermark(99)
        assert store.load_state("j", "other")["a"].watermark is None
        assert len(store.all_state("j")) == 4

    def test_watermarks_of_every_kind_survive_the_store(self) -> None:
        store = self.store()
        mark = FileWatermark(1_700_000_000_123, "file:/in/a b.json", ("file:/in/x.json",))
        store.save_state([state("f", mark, 1)])
        assert store.load_state("j", "d")["f"].watermark == mark

    def test_checkpoint_changes_newest_first(self) -> None:
        store = self.store()
        for minute in (1, 3, 2):
            at = T0 + timedelta(minutes=minute)
            store.add_change(CheckpointChange("j", "d", "a", "set", None, "{}", "why", "me", at))
        assert [c.changed_at.minute for c in store.changes("j")] == [3, 2, 1]

    def test_the_file_log_holds_each_dataset_files_by_path_mtime_and_size(self) -> None:
        store = self.store()
        assert store.files_read("j", "d") == {}
        assert not store.files_logged("j", "d", LIVE, 1)
        store.log_files([read("a", "file:/in/x.json", 1), read("b", "file:/in/b/y.json", 1, size=7)])
        store.log_files([read("a", "file:/in/x.json", 2, mtime=2000), read("a", "file:/in/z.json", 2, scope="bf")])
        store.log_files([read("a", "file:/in/q.json", 3, dag="other")])
        assert store.files_read("j", "d") == {
            "a": {("file:/in/x.json", 1000, 10), ("file:/in/x.json", 2000, 10)},
            "b": {("file:/in/b/y.json", 1000, 7)},
        }
        assert store.files_read("j", "d", "bf") == {"a": {("file:/in/z.json", 1000, 10)}}
        assert store.files_logged("j", "d", LIVE, 1) and store.files_logged("j", "d", LIVE, 2)
        assert not store.files_logged("j", "d", LIVE, 3)  # batch 3 is another DAG's

    def test_the_newest_pinned_schema_of_a_dag_wins(self) -> None:
        store = self.store()
        assert store.pinned_schema("j", "d") is None
        store.pin_schema(PinnedSchema("j", "d", "f1", "id INT", "r1", T0))
        store.pin_schema(PinnedSchema("j", "other", "f1", "x STRING", "r1", T0))
        newest = PinnedSchema("j", "d", "f2", "id BIGINT", "r2", T0 + timedelta(minutes=1))
        store.pin_schema(newest)
        assert store.pinned_schema("j", "d") == newest
        assert store.pinned_schema("k", "d") is None


class StatusStoreContract:
    """Every :class:`StatusStore` passes these."""

    def store(self) -> StatusStore:
        raise NotImplementedError

    def test_job_status_keeps_the_last_runs_newest_first(self) -> None:
        store = self.store()
        for minute, run in enumerate(("r1", "r2", "r3")):
            store.add_job_status([status(run, "a", minute), status(run, "b", minute)])
        rows = store.job_status("j", runs=2)
        assert [(r.run_id, r.dataset) for r in rows] == [("r3", "b"), ("r3", "a"), ("r2", "b"), ("r2", "a")]
        assert rows[0].status is Status.COMMITTED

    def test_flow_status_newest_first(self) -> None:
        store = self.store()
        for minute in (1, 3, 2):
            at = T0 + timedelta(minutes=minute)
            store.add_flow_status(FlowStatusRow(f"r{minute}", "j", Status.PARTIAL, "", 2, 1, 1, 9, at, at))
        flows = store.flow_status("j", limit=2)
        assert [f.run_id for f in flows] == ["r3", "r2"]
        assert flows[0].status is Status.PARTIAL


class CommitLogStoreContract:
    """Every :class:`CommitLogStore` passes these."""

    def store(self) -> CommitLogStore:
        raise NotImplementedError

    def test_the_log_of_a_job_reads_back_oldest_first(self) -> None:
        store = self.store()
        rows = [
            LogRow("j", "d", LIVE, 1, "plan", "r1", T0, '{"units": []}'),
            LogRow("k", "d", LIVE, 1, "plan", "r1", T0 + timedelta(minutes=1)),
            LogRow("j", "d", LIVE, 1, "attempt", "r1", T0 + timedelta(minutes=2), "", "boom"),
        ]
        store.append_log(rows[:2])
        store.append_log(rows[2:])
        assert store.read_log("j") == [rows[0], rows[2]]
        assert store.read_log("nobody") == []

    def test_the_epoch_stays_the_same_for_the_log(self) -> None:
        store = self.store()
        assert store.log_epoch() and store.log_epoch() == store.log_epoch()


def read(dataset: str, path: str, batch: int, *, mtime: int = 1000, size: int = 10, **key: str) -> FileRead:
    where = {"dag": "d", "scope": LIVE, **key}
    return FileRead("j", where["dag"], where["scope"], dataset, path, mtime, size, batch, f"r{batch}", T0)


class TestInMemoryMetadataStore(StateStoreContract, StatusStoreContract, CommitLogStoreContract):
    def store(self) -> MetadataStore:
        return InMemoryMetadataStore()


@pytest.mark.s3
class TestDeltaMetadataStoreOnS3(StateStoreContract, StatusStoreContract, CommitLogStoreContract):
    """delta-rs to tables on a real S3-compatible server (credentials checked), with the options a
    connection gives (no ``AWS_*`` variable is set): the same contracts, and an independent reader."""

    @pytest.fixture(autouse=True)
    def _s3(self, spark: Any, s3_server: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(key)
        self.spark = spark
        self.root = f"s3a://{bucket}/lake/_engine"
        self.options = s3_server.storage_options()

    def store(self) -> MetadataStore:
        from engine.state.delta_store import DeltaMetadataStore

        return DeltaMetadataStore(self.spark, self.root, backend="delta_rs", options=self.options).ensure()

    def test_tables_are_plain_delta_with_their_schema_version(self) -> None:
        self.store().save_state([state("a", LongWatermark(3), 1)])
        table = DeltaTable(f"{self.root}/state", storage_options=self.options)
        assert table.metadata().configuration["engine.schema_version"] == "1"
        (row,) = table.to_pyarrow_table().to_pylist()
        assert (row["dataset"], row["watermark"]) == ("a", '{"kind": "long", "value": 3}')

    def test_two_writers_of_one_table_lose_no_row(self) -> None:
        """Two handles opened at one version both append: the second commit's put of that version
        is refused (put-if-absent; a plain put would replace the first commit and lose row `a`),
        and it is retried on top of the first."""
        first, second = self.store(), self.store()
        first.load_state("j", "d"), second.load_state("j", "d")  # both opened at one version
        first.save_state([state("a", LongWatermark(1), 1)])
        second.save_state([state("b", LongWatermark(2), 2)])
        rows = DeltaTable(f"{self.root}/state", storage_options=self.options).to_pyarrow_table()
        assert sorted(rows.column("dataset").to_pylist()) == ["a", "b"]

    def test_two_creators_of_one_table_make_one(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from engine.state.delta_create import first_remote_commit

        url = f"{self.root}/race"
        with ThreadPoolExecutor(4) as pool:
            made = list(pool.map(lambda i: first_remote_commit(url, self.options, SCHEMA, {"who": str(i)}), range(4)))
        assert made.count(True) == 1
        who = DeltaTable(url, storage_options=self.options).metadata().configuration["who"]
        assert made[int(who)] is True


SCHEMA = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'


class TestDeltaMetadataStore(StateStoreContract, StatusStoreContract, CommitLogStoreContract):
    """Both ways to the tables: delta-rs (local warehouses) and Spark (any other file system)."""

    @pytest.fixture(autouse=True, params=["delta_rs", "spark"])
    def _spark(self, request: Any, spark: Any, lake: Path) -> None:
        self.io = request.param
        self.spark = spark
        self.root = lake / "_engine"

    def store(self) -> MetadataStore:
        from engine.state.delta_store import DeltaMetadataStore

        return DeltaMetadataStore(self.spark, str(self.root), backend=self.io).ensure()

    def test_reading_state_before_any_run_creates_nothing(self) -> None:
        from engine.state.delta_store import DeltaMetadataStore

        assert DeltaMetadataStore(self.spark, str(self.root), backend=self.io).load_state("j", "d") == {}
        assert not self.root.exists()

    def test_rows_are_readable_without_spark(self) -> None:
        self.store().save_state([state("a", LongWatermark(3), 1)])
        (row,) = DeltaTable(str(self.root / "state")).to_pyarrow_table().to_pylist()
        assert (row["dataset"], row["watermark_kind"], row["watermark"]) == (
            "a",
            "long",
            '{"kind": "long", "value": 3}',
        )

    def test_a_state_table_from_a_newer_engine_is_refused(self) -> None:
        from engine.state.delta_store import DeltaMetadataStore

        self.store()
        self.spark.sql(f"ALTER TABLE delta.`{self.root / 'state'}` SET TBLPROPERTIES ('engine.schema_version' = '2')")
        with pytest.raises(ConfigError, match="state table was written by a newer engine"):
            DeltaMetadataStore(self.spark, str(self.root), backend=self.io).load_state("j", "d")

    def test_rows_written_one_way_are_read_the_other(self) -> None:
        from engine.state.delta_store import DeltaMetadataStore

        writer = self.store()
        assert type(writer.state).__name__ == ("RustMetaTable" if self.io == "delta_rs" else "MetaTable")
        writer.save_state([state("a", LongWatermark(1), 1), state("a", LongWatermark(2), 2)])
        writer.add_job_status([status("r1", "a", 1)])
        other = "delta_rs" if self.io == "spark" else "spark"
        reader = DeltaMetadataStore(self.spark, str(self.root), backend=other).ensure()
        assert type(reader.state) is not type(writer.state)
        assert reader.load_state("j", "d")["a"].watermark == LongWatermark(2)
        assert reader.load_state("j", "d")["a"].committed_at == T0 + timedelta(minutes=2)
        assert [(r.run_id, r.start_time) for r in reader.job_status("j")] == [("r1", T0 + timedelta(minutes=1))]
        reader.save_state([state("a", LongWatermark(3), 3)])
        assert writer.load_state("j", "d")["a"].watermark == LongWatermark(3)


def test_both_ways_agree_on_times_on_a_host_outside_utc(
    spark: Any, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PySpark reads a naive datetime as the process's local time; the delta-rs path does the same,
    so rows written one way keep their order and value read the other way on any host."""
    import time

    from engine.state.delta_store import DeltaMetadataStore

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        root = str(lake / "_engine")
        by_spark = DeltaMetadataStore(spark, root, backend="spark").ensure()
        by_spark.save_state([state("a", LongWatermark(1), 1)])
        by_rust = DeltaMetadataStore(spark, root, backend="delta_rs").ensure()
        assert by_rust.load_state("j", "d")["a"].committed_at == T0 + timedelta(minutes=1)
        by_rust.save_state([state("a", LongWatermark(2), 2)])
        assert by_spark.load_state("j", "d")["a"].watermark == LongWatermark(2), "the newer row wins both ways"
        assert by_spark.load_state("j", "d")["a"].committed_at == T0 + timedelta(minutes=2)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_an_append_to_a_vanished_metadata_table_names_it_and_creates_nothing(spark: Any, lake: Path) -> None:
    from engine.state.delta_store import STATE_DDL
    from engine.state.delta_table import RustMetaTable

    path = lake / "_engine" / "state"
    table = RustMetaTable(spark, str(path), STATE_DDL, version=1, what="state")
    row = {"job": "j", "dag": "d", "scope": LIVE, "dataset": "a", "watermark": None, "watermark_kind": None}
    with pytest.raises(FileNotFoundError, match=r"the state table .*/_engine/state is gone"):
        table.append([{**row, "run_id": "r1", "committed_at": T0, "note": ""}])
    assert not path.exists(), "no table without its schema version is created"


@pytest.mark.parametrize(
    ("path", "backend", "kind"),
    [
        pytest.param("{lake}/_engine/state", "auto", "RustMetaTable", id="local-auto"),
        pytest.param("s3a://b/lake/_engine/state", "auto", "RustMetaTable", id="s3-auto"),
        pytest.param("gs://b/lake/_engine/state", "auto", "MetaTable", id="gcs-auto-spark"),
        pytest.param("hdfs://nn/lake/_engine/state", "auto", "MetaTable", id="hdfs-auto-spark"),
        pytest.param("s3a://b/lake/_engine/state", "spark", "MetaTable", id="s3-spark"),
        pytest.param("gs://b/lake/_engine/state", "delta_rs", "RustMetaTable", id="gcs-delta-rs"),
    ],
)
def test_the_backend_decides_how_a_table_is_reached(spark: Any, lake: Path, path: str, backend: str, kind: str) -> None:
    from engine.state.delta_store import STATE_DDL
    from engine.state.delta_table import meta_table

    table = meta_table(spark, path.format(lake=lake), STATE_DDL, version=1, what="state", backend=backend)
    assert type(table).__name__ == kind
    if path.startswith("s3a") and kind == "RustMetaTable":
        assert table.options["conditional_put"] == "etag"  # type: ignore[attr-defined]
