"""A deleted ``_engine/state`` table is lost state, not a first run: the run is refused before
anything is read or written, and ``mode=checkpoint checkpoint.action=start_over`` is the way to
start over on purpose.

Found on real data: after ``rm -r warehouse/_engine/state`` the next run read every file again
and the lake held each row twice, although the commit log and the file log showed what had been
committed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from engine.state.delta_store import DeltaMetadataStore
from engine.state.store import LIVE
from tests.helpers import delta_ids, run_cli, write_jsonl


def orders_job(tmp: Path) -> tuple[Path, Path]:
    """A files job (one landing file of 3 rows -> an append Delta sink ``raw``): jobs dir, warehouse."""
    land, jobs, lake = tmp / "land", tmp / "jobs", tmp / "lake"
    write_jsonl(land / "a.json", [{"id": i, "v": f"r{i}"} for i in range(3)])
    (jobs / "t").mkdir(parents=True)
    (jobs / "t" / "lost.conf").write_text(
        f"""
        name = lost
        sources.in {{ type = files, format = json, path = "{land}/*.json", schema = "id INT, v STRING" }}
        sinks.raw {{ type = delta, path = raw }}
        """
    )
    return jobs, lake


def versions(lake: Path) -> dict[str, int]:
    """The Delta version of the sink and of every metadata table that exists (read with delta-rs)."""
    tables = [lake / "raw", *(p for p in (lake / "_engine").iterdir() if (p / "_delta_log").is_dir())]
    return {p.name: DeltaTable(str(p)).version() for p in tables}


def test_a_deleted_state_table_refuses_the_run_before_anything_is_read_or_written(spark: Any, tmp_path: Path) -> None:
    jobs, lake = orders_job(tmp_path)
    code, first, said = run_cli(jobs, "job=t/lost", f"warehouse={lake}")
    assert (code, first["records_read"]) == (0, 3), said
    shutil.rmtree(lake / "_engine" / "state")
    before = versions(lake)

    code, refused, said = run_cli(jobs, "job=t/lost", f"warehouse={lake}")

    assert (code, refused["status"]) == (2, "CONFIG_ERROR"), said
    message = refused["message"]
    assert f"the state table {lake}/_engine/state is missing" in message
    assert "the commit log" in message and "the job status" in message  # the file log: batches it knows
    assert "RESTORE TABLE" in message
    assert "mode=checkpoint checkpoint.action=start_over checkpoint.dag=lost" in message
    assert versions(lake) == before  # nothing written: no sink commit, no metadata row, no state table
    assert not (lake / "_engine" / "state").exists()
    assert delta_ids(lake / "raw") == [0, 1, 2]
    code, status, said = run_cli(jobs, "job=t/lost", f"warehouse={lake}", "mode=status")
    assert code == 0, said
    assert status["lost_state"] == [{"dag": "lost", "scope": LIVE, "datasets": [f"files:{tmp_path}/land/*.json"]}]
    assert "== lost state: runs are refused" in said


def test_start_over_acknowledges_lost_state_and_the_next_run_reads_everything_once_more(
    spark: Any, tmp_path: Path
) -> None:
    jobs, lake = orders_job(tmp_path)
    assert run_cli(jobs, "job=t/lost", f"warehouse={lake}")[0] == 0
    shutil.rmtree(lake / "_engine" / "state")
    assert run_cli(jobs, "job=t/lost", f"warehouse={lake}")[0] == 2

    code, ack, said = run_cli(
        jobs,
        "job=t/lost",
        f"warehouse={lake}",
        "mode=checkpoint",
        "checkpoint.action=start_over",
        "checkpoint.reason='state deleted by mistake; re-read on purpose'",
    )
    assert (code, ack["status"], ack["action"]) == (0, "CHANGED", "start_over"), said
    assert ack["scopes"] == {LIVE: [f"files:{tmp_path}/land/*.json"]}
    code, again, said = run_cli(jobs, "job=t/lost", f"warehouse={lake}")
    code_idle, idle, _ = run_cli(jobs, "job=t/lost", f"warehouse={lake}")

    assert (code, again["records_read"]) == (0, 3), said
    assert (code_idle, idle["records_read"]) == (0, 0)  # the state is back: nothing read twice more
    assert delta_ids(lake / "raw") == [0, 0, 1, 1, 2, 2]  # the append sink got it again, as acknowledged
    store = DeltaMetadataStore(spark, str(lake / "_engine"))
    (change,) = store.changes("lost")
    assert (change.action, change.reason) == ("start_over", "state deleted by mistake; re-read on purpose")


def test_start_over_is_refused_when_the_state_is_not_lost(spark: Any, tmp_path: Path) -> None:
    jobs, lake = orders_job(tmp_path)
    assert run_cli(jobs, "job=t/lost", f"warehouse={lake}")[0] == 0
    before = versions(lake)

    code, refused, said = run_cli(
        jobs,
        "job=t/lost",
        f"warehouse={lake}",
        "mode=checkpoint",
        "checkpoint.action=start_over",
        "checkpoint.reason=x",
    )

    assert (code, refused["status"]) == (2, "CONFIG_ERROR"), said
    assert "the state of DAG `lost` is not lost" in refused["message"]
    assert "checkpoint.action" in refused["message"]
    assert versions(lake) == before
