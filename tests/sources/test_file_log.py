"""The file log: a landing folder loses no file because of its modification time, and a rewind
reads exactly what comes after the new watermark.

Found on real data: a file delivered with a three-hour-old modification time (as ``rsync -a``,
``cp -p`` or ``distcp -p`` deliver them) was skipped for ever; a rewind to month 3 re-read all six
monthly files instead of months 4-6. Files here are minutes apart, as a landing folder fills."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.sources.base import PlanContext
from engine.sources.files import FilesSource
from engine.sources.workunits import Budget
from engine.state.delta_store import DeltaMetadataStore
from engine.state.store import LIVE, DatasetState, InMemoryMetadataStore
from engine.state.watermarks import FileWatermark
from tests.helpers import compile_dict, delta_ids, run_cli, run_with, touch

T0 = float(int(time.time()) - 86_400)  # whole seconds: modification times compare exactly in ms
MINUTE = 60.0


def rows(lo: int, hi: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"r{i}"} for i in range(lo, hi)]


def job(path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(path), "schema": "id INT, v STRING"}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
        **extra,
    }


def logged(lake: Path) -> list[dict[str, Any]]:
    """The file log, read with delta-rs."""
    return DeltaTable(str(lake / "_engine" / "files_read")).to_pyarrow_table().to_pylist()


def test_a_file_delivered_with_an_old_modification_time_is_read(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    for month in range(1, 7):  # six files read, one per run
        touch(land / f"m{month}.json", rows(month * 100, month * 100 + 10), mtime=T0 + month * MINUTE)
        assert run_with(spark, job(land / "*.json"), lake, store, run=month).summary()["records_read"] == 10
    touch(land / "m7.json", rows(700, 705), mtime=T0 - 3 * 3600)  # three hours before the watermark
    late = run_with(spark, job(land / "*.json"), lake, store, run=7)
    idle = run_with(spark, job(land / "*.json"), lake, store, run=8)

    assert late.summary()["records_read"] == 5
    (outcome,) = late.dags[0].datasets
    assert outcome.message == "1 late file(s)"
    assert idle.summary()["records_read"] == 0
    assert delta_ids(lake / "out") == sorted(i for m in range(1, 7) for i in range(m * 100, m * 100 + 10)) + list(
        range(700, 705)
    )
    files = logged(lake)
    assert sorted(Path(f["path"]).name for f in files) == [f"m{m}.json" for m in range(1, 8)]
    assert {f["run_id"] for f in files if f["path"].endswith("m7.json")} == {"run-7"}
    (state,) = store.load_state("t", "t", LIVE).values()
    assert isinstance(state.watermark, FileWatermark) and state.watermark.path.endswith("m6.json")  # mtime orders


def test_a_file_rewritten_in_place_is_read_again_whatever_its_modification_time(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = InMemoryMetadataStore()
    touch(land / "a.json", rows(0, 5), mtime=T0)
    touch(land / "b.json", rows(5, 10), mtime=T0 + MINUTE)
    assert run_with(spark, job(land / "*.json"), lake, store, run=1).summary()["records_read"] == 10
    touch(land / "a.json", rows(10, 17), mtime=T0)  # new content, the old modification time kept
    again = run_with(spark, job(land / "*.json"), lake, store, run=2)
    touch(land / "b.json", rows(5, 6), mtime=T0 + 2 * MINUTE)  # rewritten later
    third = run_with(spark, job(land / "*.json"), lake, store, run=3)
    touch(land / "b.json", rows(5, 8), mtime=T0 + 3 * MINUTE)  # lines appended to it: only they are new
    fourth = run_with(spark, job(land / "*.json"), lake, store, run=4)
    idle = run_with(spark, job(land / "*.json"), lake, store, run=5)

    assert [r.summary()["records_read"] for r in (again, third, fourth, idle)] == [7, 1, 2, 0]


def test_a_late_file_older_than_any_lookback_is_read_once_even_when_throttled(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    store = InMemoryMetadataStore()
    for i in range(3):
        touch(land / f"n{i}.json", rows(i * 10, i * 10 + 10), mtime=T0 + i * MINUTE)
    spec = job(land / "*.json")
    spec["sources"]["in"]["limits"] = {"max_files": 2}
    first = run_with(spark, spec, lake, store, run=1)
    touch(land / "old.json", rows(100, 103), mtime=T0 - 30 * 86_400)  # a month old
    reads = [run_with(spark, spec, lake, store, run=n).summary()["records_read"] for n in range(2, 5)]

    assert first.summary()["records_read"] == 20
    assert reads == [13, 0, 0]  # the late file first (by modification time), then n2; nothing twice
    assert delta_ids(lake / "out") == [*range(30), 100, 101, 102]


def write_months(land: Path) -> dict[int, Path]:
    return {
        m: touch(land / f"2026-0{m}.json", rows(m * 1000, m * 1000 + 10 * m), mtime=T0 + m * 7 * MINUTE)
        for m in range(1, 7)
    }


def months_job(jobs: Path, land: Path) -> None:
    (jobs / "t").mkdir(parents=True)
    (jobs / "t" / "months.conf").write_text(
        f"""
        name = months
        sources.in {{ type = files, format = json, path = "{land}/*.json", schema = "id INT, v STRING" }}
        sinks.lake {{ type = delta, path = lake, mode = merge, keys = [id] }}
        sinks.raw {{ type = delta, path = raw }}
        """
    )


def test_a_rewind_reads_exactly_what_comes_after_the_new_watermark(spark: Any, lake: Path) -> None:
    land, jobs = lake.parent / "land", lake.parent / "jobs"
    months = write_months(land)
    months_job(jobs, land)
    code, first, _ = run_cli(jobs, "job=t/months", f"warehouse={lake}")
    assert (code, first["records_read"]) == (0, sum(10 * m for m in range(1, 7)))
    urn = f"files:{land}/*.json"
    month3 = f"{int(os.stat(months[3]).st_mtime * 1000)}|file:{months[3]}"
    code, _, said = run_cli(
        jobs,
        "job=t/months",
        f"warehouse={lake}",
        "mode=checkpoint",
        "checkpoint.action=rewind",
        f"checkpoint.dataset={urn}",
        f"checkpoint.value={month3}",
        "checkpoint.reason='replay months 4-6, after a bad deploy'",
    )
    assert code == 0, said
    code, replay, said = run_cli(jobs, "job=t/months", f"warehouse={lake}")
    code_idle, idle, _ = run_cli(jobs, "job=t/months", f"warehouse={lake}")

    assert code == 0, said
    assert replay["records_read"] == 40 + 50 + 60  # months 4-6, not month 3 nor the ones before
    assert "late file" not in json.dumps(replay)
    assert (code_idle, idle["records_read"]) == (0, 0)
    lake_ids = delta_ids(lake / "lake")
    assert len(lake_ids) == len(set(lake_ids)) == sum(10 * m for m in range(1, 7))
    raw_ids = delta_ids(lake / "raw")  # an append sink receives the re-read months again, as the command said
    assert len(raw_ids) == sum(10 * m for m in range(1, 7)) + 150
    assert {i // 1000 for i in raw_ids if raw_ids.count(i) == 2} == {4, 5, 6}


def test_a_checkpoint_set_counts_everything_before_it_as_read(spark: Any, lake: Path) -> None:
    land = lake.parent / "land"
    months = write_months(land)
    store = InMemoryMetadataStore()
    from engine.state.checkpoints import CheckpointRequest, change_checkpoint

    value = f"{int(os.stat(months[3]).st_mtime * 1000)}|file:{months[3]}"
    urn = f"files:{land}/*.json"
    request = CheckpointRequest("set", urn, value, "file", "start after March")
    # a dataset no run has read yet: set as the source names it (``mode=checkpoint`` asks the config)
    change_checkpoint(store, "t", ["t"], request, run_id="c1", names_dataset=lambda _dag, named: named == urn)
    first = run_with(spark, job(land / "*.json"), lake, store, run=1)
    touch(land / "2026-02-late.json", rows(99_000, 99_001), mtime=T0 + 2 * 7 * MINUTE)  # before the set value
    second = run_with(spark, job(land / "*.json"), lake, store, run=2)

    assert first.summary()["records_read"] == 40 + 50 + 60
    assert second.summary()["records_read"] == 0


def test_a_watermark_stored_before_the_file_log_keeps_its_look_back_window(spark: Any, lake: Path) -> None:
    """An upgrade reads nothing twice: files older than ``lookback`` before the old watermark and
    the paths it kept as recently read count as read; an unread one within the window is late."""
    land = lake.parent / "land"
    touch(land / "old.json", rows(0, 3), mtime=T0 - 7200)  # before the old look-back window: read
    kept = touch(land / "kept.json", rows(3, 6), mtime=T0 - 600)
    touch(land / "late.json", rows(6, 8), mtime=T0 - 300)  # unread, within the old look-back: late
    last = touch(land / "last.json", rows(8, 9), mtime=T0)
    touch(land / "new.json", rows(9, 10), mtime=T0 + MINUTE)
    recent = [f"file:{kept}", f"file:{last}"]
    stored = {"kind": "file", "value": {"mtime_ms": int(T0 * 1000), "path": f"file:{last}", "recent": recent}}
    store = InMemoryMetadataStore()
    from engine.state import watermarks

    mark = watermarks.parse(json.dumps(stored))
    store.save_state([DatasetState("t", "t", LIVE, f"files:{land}/*.json", mark, "old-run", datetime(2026, 1, 1))])
    result = run_with(spark, job(land / "*.json"), lake, store, run=1)

    assert delta_ids(lake / "out") == [6, 7, 9]  # late.json and new.json
    (state,) = store.load_state("t", "t", LIVE).values()
    assert isinstance(state.watermark, FileWatermark) and not state.watermark.legacy
    assert state.watermark.floor == (int(T0 * 1000) - 3_600_000, "\U0010ffff")
    assert result.summary()["records_read"] == 3


def test_planning_a_folder_of_20000_files_finds_the_one_not_read(spark: Any, lake: Path) -> None:
    """20,000 files logged as read, one more delivered with an old modification time: planning
    picks exactly that one (the cost is reported by ``bench/file_log.py``)."""
    land = lake.parent / "land"
    land.mkdir()
    names = [f"f{i:05d}.json" for i in range(20_000)]
    for i, name in enumerate(names):
        path = land / name
        path.write_text('{"id": 1}\n')
        os.utime(path, (T0 + i, T0 + i))
    late = touch(land / "zz-late.json", rows(0, 1), mtime=T0 - 86_400)
    spec = compile_dict(job(land / "*.json"), lake).dags[0]
    source = FilesSource(spec.source.conf, name="in", key="job.sources.in", schema_ddl="id INT")  # type: ignore[attr-defined]
    urn = f"files:{land}/*.json"
    last = land / names[-1]
    mark = FileWatermark(int(os.stat(last).st_mtime * 1000), f"file:{last}", floor=None)
    logged_files = {(f"file:{land / n}", int(os.stat(land / n).st_mtime * 1000), 10) for n in names}
    ctx = PlanContext(
        state={urn: DatasetState("t", "t", LIVE, urn, mark, "r", datetime(2026, 1, 1))},
        per_dataset=Budget(),
        per_run=Budget(),
        now=datetime.utcnow(),
        files_read=lambda: {urn: logged_files},
    )
    (unit,) = source.plan(spark, ctx)
    assert [f.path for f in unit.payload] == [f"file:{late}"]
    assert unit.note == "1 late file(s)"


@pytest.mark.parametrize("action", ["rewind", "set"])
def test_a_rewind_or_set_of_a_watermark_stored_before_the_file_log_reads_what_comes_after(
    spark: Any, lake: Path, action: str
) -> None:
    land = lake.parent / "land"
    months = write_months(land)
    store = InMemoryMetadataStore()
    urn = f"files:{land}/*.json"
    last = {"mtime_ms": int(os.stat(months[6]).st_mtime * 1000), "path": f"file:{months[6]}", "recent": []}
    from engine.state import watermarks
    from engine.state.checkpoints import CheckpointRequest, change_checkpoint

    mark = watermarks.parse(json.dumps({"kind": "file", "value": last}))
    store.save_state([DatasetState("t", "t", LIVE, urn, mark, "old-run", datetime(2026, 1, 1))])
    value = f"{int(os.stat(months[3]).st_mtime * 1000)}|file:{months[3]}"
    change_checkpoint(store, "t", ["t"], CheckpointRequest(action, urn, value, None, "replay"), run_id="c1")
    result = run_with(spark, job(land / "*.json"), lake, store, run=1)

    assert result.summary()["records_read"] == 40 + 50 + 60


def test_a_rewind_after_an_upgrade_keeps_the_paths_the_old_watermark_knew_were_read(spark: Any, lake: Path) -> None:
    """A watermark stored before the file log, advanced once since (it then has a floor and still
    its old look-back paths, which the log never had): a rewind within that window reads what
    comes after the value, not the files the old engine read before it."""
    land = lake.parent / "land"
    kept = touch(land / "kept.json", rows(0, 3), mtime=T0 - 600)
    mid = touch(land / "mid.json", rows(3, 6), mtime=T0 - 300)
    last = touch(land / "last.json", rows(6, 8), mtime=T0)
    urn = f"files:{land}/*.json"
    recent = [f"file:{kept}", f"file:{mid}", f"file:{last}"]
    stored = {"kind": "file", "value": {"mtime_ms": int(T0 * 1000), "path": f"file:{last}", "recent": recent}}
    store = InMemoryMetadataStore()
    from engine.state import watermarks
    from engine.state.checkpoints import CheckpointRequest, change_checkpoint

    mark = watermarks.parse(json.dumps(stored))
    store.save_state([DatasetState("t", "t", LIVE, urn, mark, "old-run", datetime(2026, 1, 1))])
    touch(land / "new.json", rows(8, 9), mtime=T0 + MINUTE)
    run_with(spark, job(land / "*.json"), lake, store, run=1)  # the upgrade: new.json only
    value = f"{int(os.stat(mid).st_mtime * 1000)}|file:{mid}"
    change_checkpoint(store, "t", ["t"], CheckpointRequest("rewind", urn, value, None, "replay"), run_id="c1")
    run_with(spark, job(land / "*.json"), lake, store, run=2)

    assert delta_ids(lake / "out") == [6, 7, 8, 8]  # then last.json and new.json again, nothing before mid


def test_a_lost_file_log_is_refused_and_a_set_to_the_watermark_acknowledges_it(spark: Any, lake: Path) -> None:
    """Without its file log, every file before the watermark would look late and be read again."""
    import shutil

    land, jobs = lake.parent / "land", lake.parent / "jobs"
    months = write_months(land)
    months_job(jobs, land)
    code, _, said = run_cli(jobs, "job=t/months", f"warehouse={lake}")
    assert code == 0, said
    shutil.rmtree(lake / "_engine" / "files_read")
    version = DeltaTable(str(lake / "raw")).version()
    code, refused, said = run_cli(jobs, "job=t/months", f"warehouse={lake}")

    assert code == 2, said
    assert refused["status"] == "CONFIG_ERROR"
    assert "_engine/files_read" in refused["message"] and "job.sources.in" in refused["message"]
    assert DeltaTable(str(lake / "raw")).version() == version  # nothing written
    value = f"{int(os.stat(months[6]).st_mtime * 1000)}|file:{months[6]}"
    assert f"checkpoint.value='{value}'" in refused["message"]
    code, _, said = run_cli(
        jobs,
        "job=t/months",
        f"warehouse={lake}",
        "mode=checkpoint",
        "checkpoint.action=set",
        f"checkpoint.dataset=files:{land}/*.json",
        f"checkpoint.value='{value}'",
        "checkpoint.reason='the file log was lost'",
    )
    assert code == 0, said
    code, after, said = run_cli(jobs, "job=t/months", f"warehouse={lake}")
    assert (code, after["records_read"]) == (0, 0), said
    assert len(delta_ids(lake / "raw")) == sum(10 * m for m in range(1, 7))
