"""The runs-store contract, run against the in-memory twin and the Delta store."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from engine.state import InMemoryRunStore, RunRecord, RunStore
from engine.state.runs import WriteBehind
from engine.state.status import Status

if TYPE_CHECKING:
    from engine.state.delta_runs import DeltaRunStore

T0 = datetime(2026, 11, 1, 10, 0, 0)


class RunStoreContract:
    """Every RunStore implementation passes these."""

    def store(self) -> RunStore:
        raise NotImplementedError

    def test_latest_row_per_run_and_dag_wins(self) -> None:
        store = self.store()
        start = RunRecord(run_id="r1", job="j", dag="a", status=Status.RUNNING, start_time=T0)
        store.append(start)
        store.append(start.finished(Status.SUCCEEDED, end_time=T0.replace(minute=5), records_read=7))
        store.append(RunRecord(run_id="r1", job="other", dag="a", status=Status.RUNNING, start_time=T0))
        (row,) = store.history("j")
        assert (row.status, row.records_read, row.end_time) == (Status.SUCCEEDED, 7, T0.replace(minute=5))

    def test_history_is_newest_first_and_limited(self) -> None:
        store = self.store()
        for i in range(3):
            store.append(
                RunRecord(run_id=f"r{i}", job="j", dag="a", status=Status.FAILED, start_time=T0.replace(hour=i))
            )
        assert [r.run_id for r in store.history("j", limit=2)] == ["r2", "r1"]


class TestInMemoryRunStore(RunStoreContract):
    def store(self) -> RunStore:
        return InMemoryRunStore()


class TestDeltaRunStore(RunStoreContract):
    @pytest.fixture(autouse=True, params=["delta_rs", "spark"])
    def _spark(self, request: Any, spark: Any, lake: Path) -> None:
        self.backend = request.param
        self.spark = spark
        self.path = str(lake / "_engine" / "runs")

    def store(self) -> RunStore:
        return self.delta()

    def delta(self) -> DeltaRunStore:
        from engine.state.delta_runs import DeltaRunStore

        return DeltaRunStore(self.spark, self.path, backend=self.backend)

    def test_table_carries_its_schema_version(self) -> None:
        self.delta().ensure()
        table = DeltaTable(self.path)
        assert table.metadata().configuration["engine.schema_version"] == "1"
        assert "schema_version" in table.schema().to_arrow().names

    def test_a_newer_schema_version_is_refused(self) -> None:
        self.delta().ensure()
        self.spark.sql(f"ALTER TABLE delta.`{self.path}` SET TBLPROPERTIES ('engine.schema_version' = '9')")
        with pytest.raises(ConfigError, match="newer engine"):
            self.delta().ensure()
        with pytest.raises(ConfigError, match="newer engine"):
            self.delta().append(RunRecord("r9", "j", "d", Status.RUNNING, datetime(2026, 1, 1)))

    def test_constructing_creates_nothing_and_the_first_append_creates_the_table(self) -> None:
        store = self.delta()  # the CLI builds it before planning, which may still fail
        assert store.history("j") == []
        assert not Path(self.path).exists()
        store.append(RunRecord("r1", "j", "d", Status.RUNNING, datetime(2026, 1, 1)))
        assert DeltaTable(self.path).metadata().configuration["engine.schema_version"] == "1"
        assert [(r.run_id, r.status) for r in self.delta().history("j")] == [("r1", Status.RUNNING)]


class TestWriteBehind:
    """Run rows are appended on a thread of their own, in order; nothing is lost or hidden."""

    def test_rows_land_in_order_and_history_waits_for_them(self) -> None:
        inner = InMemoryRunStore()
        runs = WriteBehind(inner)
        for i in range(50):
            runs.append(RunRecord("r1", "j", f"d{i % 3}", Status.RUNNING if i < 47 else Status.SUCCEEDED, T0))
        assert {(r.dag, r.status) for r in runs.history("j")} == {
            ("d0", Status.SUCCEEDED),
            ("d1", Status.SUCCEEDED),
            ("d2", Status.SUCCEEDED),
        }
        runs.close()
        assert len(inner._rows) == 50

    def test_close_raises_the_first_failed_append_after_writing_the_rest(self) -> None:
        class Flaky(InMemoryRunStore):
            def append(self, record: RunRecord) -> None:
                if record.dag == "bad":
                    raise OSError(f"cannot append the row of {record.dag}")
                super().append(record)

        inner = Flaky()
        runs = WriteBehind(inner)
        for dag in ("a", "bad", "b"):
            runs.append(RunRecord("r1", "j", dag, Status.SUCCEEDED, T0))
        with pytest.raises(OSError, match="row of bad"):
            runs.close()
        assert [r.dag for r in inner._rows] == ["a", "b"]
