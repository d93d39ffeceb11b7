"""A metadata table whose Delta log holds an entry that does not parse is refused (exit 2) with a
message naming the table and the file, before anything is read or written.

Found on real data: the run failed with only "Kernel error: Json error: Encountered unexpected 'b'
whilst parsing object", naming neither the table nor the file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.state.damage import find_damage
from tests.helpers import delta_ids, run_cli, write_jsonl

TABLES = {
    "state": "state",
    "job_status": "job status",
    "flow_status": "flow status",
    "checkpoint_changes": "checkpoint changes",
    "commit_log": "commit log",
    "files_read": "file log",
    "runs": "runs",
}
"""Each metadata table under ``_engine/`` and how messages call it."""


@pytest.fixture(scope="module")
def committed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse after one run of a files job (3 rows into the Delta sink ``raw``), and a second
    landing file waiting: a run that went ahead would write. Tests copy it."""
    root = tmp_path_factory.mktemp("damaged")
    land, jobs = root / "land", root / "jobs"
    write_jsonl(land / "a.json", [{"id": i} for i in range(3)])
    (jobs / "t").mkdir(parents=True)
    (jobs / "t" / "dmg.conf").write_text(
        f"""
        name = dmg
        sources.in {{ type = files, format = json, path = "{land}/*.json", schema = "id INT" }}
        sinks.raw {{ type = delta, path = raw }}
        """
    )
    code, _, said = run_cli(jobs, "job=t/dmg", f"warehouse={root / 'lake'}")
    assert code == 0, said
    write_jsonl(land / "b.json", [{"id": 10}])
    return root


def fresh_lake(committed: Path, tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    shutil.copytree(committed / "lake", lake)
    return lake


def damage(table: Path, version: int | None = None) -> Path:
    """Spoil a commit of ``table`` (the newest by default) as the user's was: a stray ``b``."""
    entries = sorted((table / "_delta_log").glob("*.json"))
    entry = entries[-1] if version is None else table / "_delta_log" / f"{version:020d}.json"
    assert entry in entries
    entry.write_text(entry.read_text().replace('{"', '{b"', 1))
    return entry


def refused(committed: Path, lake: Path, *args: str) -> str:
    """The message a run refused with exit 2 gave; nothing was read into or written to the sink."""
    before = DeltaTable(str(lake / "raw")).version()
    code, summary, said = run_cli(committed / "jobs", "job=t/dmg", f"warehouse={lake}", *args)
    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), said
    assert DeltaTable(str(lake / "raw")).version() == before
    assert delta_ids(lake / "raw") == [0, 1, 2]
    message = summary["message"]
    assert isinstance(message, str)
    return message


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in TABLES])
def test_a_damaged_newest_log_entry_of_any_metadata_table_is_named_with_its_file(
    spark: Any, committed: Path, tmp_path: Path, name: str
) -> None:
    lake = fresh_lake(committed, tmp_path)
    entry = damage(lake / "_engine" / name)

    message = refused(committed, lake)

    assert f"the {TABLES[name]} metadata table {lake}/_engine/{name} is damaged" in message
    assert f"its log entry {entry} is not valid JSON (line 1:" in message
    assert "Restore that file from a backup" in message
    assert "the newest entry, as this one is" in message


def test_an_older_damaged_entry_is_not_offered_for_removal(spark: Any, committed: Path, tmp_path: Path) -> None:
    lake = fresh_lake(committed, tmp_path)
    entry = damage(lake / "_engine" / "state", version=0)

    message = refused(committed, lake)

    assert f"its log entry {entry} is not valid JSON" in message
    assert "it is not the newest entry, so removing it would break the table" in message


def test_through_spark_the_damaged_table_is_named_too(spark: Any, committed: Path, tmp_path: Path) -> None:
    lake = fresh_lake(committed, tmp_path)
    entry = damage(lake / "_engine" / "state")

    message = refused(committed, lake, "metadata.backend=spark")

    assert f"the state metadata table {lake}/_engine/state is damaged: its log entry {entry}" in message


def test_mode_status_names_the_damaged_table(spark: Any, committed: Path, tmp_path: Path) -> None:
    lake = fresh_lake(committed, tmp_path)
    entry = damage(lake / "_engine" / "flow_status")

    message = refused(committed, lake, "mode=status")

    assert f"the flow status metadata table {lake}/_engine/flow_status is damaged: its log entry {entry}" in message


def test_only_entries_a_reader_reads_are_blamed(tmp_path: Path) -> None:
    """Commits older than the last checkpoint are never read, so never named; the checkpoint
    pointer and the commits after it are."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(table), pa.table({"id": [i]}), mode="append")
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(str(table), pa.table({"id": [3]}), mode="append")
    assert find_damage(str(table)) is None

    damage(table, version=1)
    assert find_damage(str(table)) is None
    newest = damage(table, version=3)
    found = find_damage(str(table))
    assert found is not None and (found.entry, found.newest) == (str(newest), True)
    pointer = table / "_delta_log" / "_last_checkpoint"
    pointer.write_text("not json")
    found = find_damage(str(table))
    assert found is not None and (found.entry, found.newest) == (str(pointer), False)
