"""The files source, incrementally: new files by (modification time, path), late files, throttling,
per-directory datasets, date partitions, backfills, and the publish policies under failure."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine import hooks
from engine.state.status import Status
from engine.state.store import LIVE, InMemoryMetadataStore
from engine.state.watermarks import FileWatermark, TimestampWatermark
from tests.helpers import delta_ids, run_with, touch

T0 = time.time() - 86_400  # yesterday: every file is old enough to read


def rows(lo: int, hi: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"r{i}"} for i in range(lo, hi)]


def job(path: Path, **source: Any) -> dict[str, Any]:
    extra = source.pop("extra", {})
    return {
        "sources": {
            "in": {"type": "files", "format": "json", "path": str(path), "schema": "id INT, v STRING", **source}
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
        **extra,
    }


def test_three_runs_read_each_record_exactly_once_with_state_in_delta(spark: Any, lake: Path) -> None:
    from engine.state.delta_store import DeltaMetadataStore

    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    touch(land / "a.json", rows(0, 10), mtime=T0)
    first = run_with(spark, job(land / "*.json"), lake, store, run=1)
    touch(land / "b.json", rows(10, 25), mtime=T0 + 60)
    touch(land / "c.json", rows(25, 30), mtime=T0 + 60)
    second = run_with(spark, job(land / "*.json"), lake, store, run=2)
    touch(land / "d.json", rows(30, 42), mtime=T0 + 120)
    third = run_with(spark, job(land / "*.json"), lake, store, run=3)
    idle = run_with(spark, job(land / "*.json"), lake, store, run=4)

    assert [r.summary()["records_read"] for r in (first, second, third, idle)] == [10, 20, 12, 0]
    assert delta_ids(lake / "out") == list(range(42))  # each id once: nothing skipped, nothing twice
    state = DeltaTable(str(lake / "_engine" / "state")).to_pyarrow_table().to_pylist()
    assert sorted(r["run_id"] for r in state) == ["run-1", "run-2", "run-3"]  # an idle run writes no state
    (live,) = store.load_state("t", "t", LIVE).values()
    assert isinstance(live.watermark, FileWatermark) and live.watermark.path.endswith("/d.json")
    statuses = DeltaTable(str(lake / "_engine" / "job_status")).to_pyarrow_table().to_pylist()
    assert [(s["run_id"], s["status"], s["records"]) for s in sorted(statuses, key=lambda s: s["run_id"])] == [
        ("run-1", "COMMITTED", 10),
        ("run-2", "COMMITTED", 20),
        ("run-3", "COMMITTED", 12),
        ("run-4", "EMPTY", 0),
    ]
    committed = [s for s in statuses if s["status"] == "COMMITTED"]
    assert all(s["bytes"] > 0 and s["executor_seconds"] > 0 for s in committed)  # the cost, for chargeback
    flows = DeltaTable(str(lake / "_engine" / "flow_status")).to_pyarrow_table().to_pylist()
    assert sorted((f["run_id"], f["status"], f["records"]) for f in flows) == [
        ("run-1", "SUCCEEDED", 10),
        ("run-2", "SUCCEEDED", 20),
        ("run-3", "SUCCEEDED", 12),
        ("run-4", "SUCCEEDED", 0),
    ]


def test_ties_on_modification_time_are_ordered_by_path_across_throttled_runs(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    for i, name in enumerate("edcba"):
        touch(land / f"{name}.json", rows(i * 10, i * 10 + 10), mtime=T0)  # all in the same millisecond
    store = InMemoryMetadataStore()
    spec = job(land / "*.json", limits={"max_files": 2})
    reads = [run_with(spark, spec, lake, store, run=n).summary()["records_read"] for n in range(1, 5)]
    assert reads == [20, 20, 10, 0]
    assert delta_ids(lake / "out") == list(range(50))
    marks = [s.watermark for s in store.states]
    assert [m.path.rsplit("/", 1)[1] for m in marks if isinstance(m, FileWatermark)] == ["b.json", "d.json", "e.json"]


def test_a_late_file_within_the_lookback_is_read_once(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = InMemoryMetadataStore()
    touch(land / "new.json", rows(0, 5), mtime=T0 + 600)
    run_with(spark, job(land / "*.json"), lake, store, run=1)
    # copied in later, keeping an older modification time (10 minutes before the watermark)
    touch(land / "late.json", rows(5, 8), mtime=T0)
    second = run_with(spark, job(land / "*.json"), lake, store, run=2)
    third = run_with(spark, job(land / "*.json"), lake, store, run=3)
    assert (second.summary()["records_read"], third.summary()["records_read"]) == (3, 0)
    assert delta_ids(lake / "out") == list(range(8))
    (unit,) = second.dags[0].datasets
    assert unit.message == "1 late file(s)"


def test_files_still_being_written_wait_for_min_age(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = InMemoryMetadataStore()
    touch(land / "old.json", rows(0, 3), mtime=T0)
    touch(land / "fresh.json", rows(3, 5), mtime=time.time())
    first = run_with(spark, job(land / "*.json", min_age="10m"), lake, store, run=1)
    assert first.summary()["records_read"] == 3
    touch(land / "fresh.json", rows(3, 5), mtime=time.time() - 3600)  # now it has settled
    second = run_with(spark, job(land / "*.json", min_age="10m"), lake, store, run=2)
    assert second.summary()["records_read"] == 2
    assert delta_ids(lake / "out") == list(range(5))


def _three_datasets(land: Path) -> None:
    for n, name in enumerate(("a", "b", "c")):
        touch(land / name / "part-1.json", rows(n * 100, n * 100 + 10), mtime=T0)


@pytest.mark.parametrize("policy", ["full", "partial"])
def test_a_failing_dataset_keeps_its_watermark_under_each_policy(
    spark: Any, lake: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    land = lake.parent / "land"
    _three_datasets(land)
    store = InMemoryMetadataStore()
    spec = job(land / "*", datasets="directory", extra={"publish": {"policy": policy}})
    monkeypatch.setattr(hooks, "_current", hooks.Hooks(fail_datasets=("*/land/b",)))
    failed = run_with(spark, spec, lake, store, run=1)
    by_dataset = {o.unit.dataset.rsplit("/", 1)[1]: o.status for o in failed.dags[0].datasets}
    assert by_dataset["b"] == Status.FAILED
    state = {k.rsplit("/", 1)[1] for k in store.load_state("t", "t")}
    if policy == "full":
        assert failed.status == "FAILED"
        assert by_dataset["a"] == by_dataset["c"] == Status.ROLLED_BACK
        assert state == set()  # nothing advanced
        assert not (lake / "out").exists()  # nothing written
    else:
        assert failed.status == "PARTIAL"
        assert by_dataset["a"] == by_dataset["c"] == Status.COMMITTED
        assert state == {"a", "c"}  # b keeps its (absent) low watermark
        assert delta_ids(lake / "out") == [*range(0, 10), *range(200, 210)]

    monkeypatch.setattr(hooks, "_current", hooks.Hooks())
    touch(land / "a" / "part-2.json", rows(10, 12), mtime=T0 + 60)
    rerun = run_with(spark, spec, lake, store, run=2)
    assert rerun.status == "SUCCEEDED"
    if policy == "full":  # nothing was published: the stored plan runs again as it was, new files wait
        assert rerun.summary()["records_read"] == 30
        assert delta_ids(lake / "out") == [*range(0, 10), *range(100, 110), *range(200, 210)]
    assert run_with(spark, spec, lake, store, run=3).status == "SUCCEEDED"
    assert delta_ids(lake / "out") == [*range(0, 12), *range(100, 110), *range(200, 210)]


def test_a_failing_dataset_packed_with_others_does_not_hold_them_back(
    spark: Any, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    land = lake.parent / "land"
    _three_datasets(land)
    store = InMemoryMetadataStore()
    spec = job(
        land / "*", datasets="directory", extra={"publish": {"policy": "partial"}, "work_units": {"max_groups": 1}}
    )
    monkeypatch.setattr(hooks, "_current", hooks.Hooks(fail_datasets=("*/land/c",)))
    result = run_with(spark, spec, lake, store, run=1)
    assert sorted(o.status.value for o in result.dags[0].datasets) == ["COMMITTED", "COMMITTED", "FAILED"]
    assert delta_ids(lake / "out") == [*range(0, 10), *range(100, 110)]


def test_throttling_per_dataset_and_per_run(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    for name in ("a", "b"):
        for i in range(3):
            touch(land / name / f"{i}.json", rows(i, i + 1), mtime=T0 + i)
    store = InMemoryMetadataStore()
    spec = job(land / "*", datasets="directory", limits={"max_files": 3, "per_dataset": {"max_files": 2}})
    first = run_with(spark, spec, lake, store, run=1)
    files = {o.unit.dataset[-1]: o.unit.size.files for o in first.dags[0].datasets}
    assert files == {"a": 2, "b": 1}  # a takes its 2, the run's third file goes to b
    second = run_with(spark, spec, lake, store, run=2)
    # least recently committed first: both committed in run 1; a third run finishes the rest
    third = run_with(spark, spec, lake, store, run=3)
    total = sum(r.summary()["records_read"] for r in (first, second, third))
    assert total == 6
    assert len(delta_ids(lake / "out")) == 6


def test_a_backfill_keeps_its_own_bookkeeping_and_never_moves_the_live_watermark(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    for day in range(3):
        touch(land / f"d{day}.json", rows(day * 10, day * 10 + 10), mtime=T0 + day * 3600)
    store = InMemoryMetadataStore()
    live = run_with(spark, job(land / "*.json"), lake, store, run=1)
    assert live.summary()["records_read"] == 30
    before = store.load_state("t", "t")
    start = datetime.fromtimestamp(T0 + 3600, tz=timezone.utc).replace(tzinfo=None)
    end = start + timedelta(hours=1)
    backfill = job(land / "*.json", **{"from": start.isoformat(), "to": end.isoformat()})
    backfill["sinks"] = {"out": {"type": "delta", "path": "backfill"}}
    first = run_with(spark, backfill, lake, store, run=2)
    again = run_with(spark, backfill, lake, store, run=3)
    assert (first.summary()["records_read"], again.summary()["records_read"]) == (10, 0)
    assert delta_ids(lake / "backfill") == list(range(10, 20))
    assert store.load_state("t", "t") == before
    assert set(store.load_state("t", "t", f"backfill:{start.isoformat()}..{end.isoformat()}"))


def test_date_partitions_are_read_in_order_once_settled(spark: Any, lake: Path) -> None:
    root = lake.parent / "events"
    today = datetime.now(timezone.utc).date()
    days = [today - timedelta(days=n) for n in (3, 2, 0)]
    for n, day in enumerate(days):
        touch(root / f"dt={day:%Y-%m-%d}" / "part-0.json", rows(n * 10, n * 10 + 5), mtime=T0)
    store = InMemoryMetadataStore()
    spec = job(root, incremental="partitions", partitions={"pattern": "dt=yyyy-MM-dd"})
    first = run_with(spark, spec, lake, store, run=1)
    assert first.summary()["records_read"] == 10  # today's partition is still open
    yesterday = today - timedelta(days=1)
    touch(root / f"dt={yesterday:%Y-%m-%d}" / "part-0.json", rows(100, 103), mtime=T0)
    second = run_with(spark, spec, lake, store, run=2)
    assert second.summary()["records_read"] == 3
    assert delta_ids(lake / "out") == [*range(0, 5), *range(10, 15), *range(100, 103)]
    (state,) = store.load_state("t", "t").values()
    assert state.watermark == TimestampWatermark(datetime(yesterday.year, yesterday.month, yesterday.day))


def test_directory_datasets_with_spaces_and_plus_signs_in_their_names(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    touch(land / "x y" / "1.json", rows(0, 3), mtime=T0)
    touch(land / "p+q" / "1.json", rows(3, 8), mtime=T0)
    store = InMemoryMetadataStore()
    result = run_with(spark, job(land / "*", datasets="directory"), lake, store, run=1)
    counts = {o.unit.dataset.rsplit("/", 1)[1]: o.records for o in result.dags[0].datasets}
    assert counts == {"x y": 3, "p+q": 5}
    assert {k.rsplit("/", 1)[1] for k in store.load_state("t", "t")} == {"x y", "p+q"}


def test_a_job_level_limit_is_shared_by_its_dags_in_order(spark: Any, lake: Path) -> None:
    for name in ("a", "b"):
        for i in range(3):
            touch(lake.parent / name / f"{i}.json", rows(i, i + 1), mtime=T0 + i)

    def dag(name: str) -> dict[str, Any]:
        one = job(lake.parent / name / "*.json")
        one["sinks"] = {"out": {"type": "delta", "path": f"out_{name}"}}
        return one

    spec = {"dags": {"a": dag("a"), "b": dag("b")}, "limits": {"max_files": 4}, "parallelism": 1}
    store = InMemoryMetadataStore()
    first = run_with(spark, spec, lake, store, run=1)
    assert {d.name: d.records_read for d in first.dags} == {"a": 3, "b": 1}
    second = run_with(spark, spec, lake, store, run=2)
    assert {d.name: d.records_read for d in second.dags} == {"a": 0, "b": 2}
    assert delta_ids(lake / "out_a") == delta_ids(lake / "out_b") == [0, 1, 2]


@pytest.mark.parametrize(
    ("source", "key", "needle"),
    [
        ({"limits": {"max_bytes": "lots"}}, "job.sources.in.limits.max_bytes", "not a size"),
        ({"min_age": "soon"}, "job.sources.in.min_age", "not a duration"),
        ({"incremental": "partitions", "partitions": {"pattern": "MM/dd"}}, "job.sources.in.partitions", "yyyy"),
    ],
)
def test_throttling_and_timing_mistakes_are_config_errors_naming_the_key(
    lake: Path, source: dict[str, Any], key: str, needle: str
) -> None:
    from engine.errors import ConfigError
    from tests.helpers import compile_dict

    with pytest.raises(ConfigError, match=needle) as info:
        compile_dict(job(lake.parent / "land" / "*.json", **source), lake)
    assert (info.value.key or "").startswith(key)
    assert list(lake.iterdir()) == []
