"""What ``mode=status`` reads of a job (:class:`StatusReport`), against the in-memory stores."""

from __future__ import annotations

from datetime import datetime, timedelta

from engine.state.report import StatusReport
from engine.state.rows import LIVE, CheckpointChange, DatasetState, FlowStatusRow, JobStatusRow
from engine.state.status import Status
from engine.state.store import InMemoryMetadataStore
from engine.state.watermarks import LongWatermark

T0 = datetime(2026, 11, 1, 10)


def test_the_report_lists_live_state_first_and_the_newest_runs() -> None:
    store = InMemoryMetadataStore()
    store.save_state(
        [
            DatasetState("j", "b", LIVE, "x", LongWatermark(1), "r1", T0),
            DatasetState("j", "a", "backfill:1..2", "y", None, "r1", T0),
            DatasetState("j", "a", LIVE, "z", LongWatermark(3), "r1", T0),
        ]
    )
    for minute in range(3):
        at = T0 + timedelta(minutes=minute)
        store.add_flow_status(FlowStatusRow(f"r{minute}", "j", Status.SUCCEEDED, "", 1, 1, 0, 4, at, at))
        store.add_job_status(
            [JobStatusRow(f"r{minute}", "j", "a", LIVE, "z", Status.COMMITTED, "", 4, 1, 0.1, None, None, at, at)]
        )
    store.add_change(CheckpointChange("j", "a", "z", "set", None, None, "why", "me", T0))

    report = StatusReport.read(store, store, "j", runs=2)

    assert [(s.dag, s.scope) for s in report.states] == [("a", LIVE), ("a", "backfill:1..2"), ("b", LIVE)]
    assert report.runs_summary() == [
        {"run_id": "r2", "status": "SUCCEEDED", "records": 4},
        {"run_id": "r1", "status": "SUCCEEDED", "records": 4},
    ]
    assert [r.run_id for r in report.latest] == ["r2"]
    assert report.datasets_summary()[0] == {"dag": "a", "scope": LIVE, "dataset": "z", "watermark": 3}
    assert len(report.changes) == 1
