"""``mode=replay``: error-table rows through the job's current converters, on real Spark and Delta.

The job of the crash harness rejects every record with a negative amount (every 7th id). A fix to
its converters, then ``mode=replay``: the records that pass now reach every sink (Delta, Parquet,
Avro, JSON, read back without Spark) exactly once, their ids are marked in ``_engine/replayed``,
the ones rejected again stay in the error table unmarked, and the live watermarks do not move.
A crash at any point of the replay's commit sequence, then a rerun, publishes each record once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from tests.commit.harness import JOB, Inputs, crash_run, run_here, sink_ids, watermarks, write_job

EVEN_PASS = "amount >= 0 OR id % 2 = 0"
"""A first fix: the rejected records of even id pass now, the odd ones are still rejected."""


def _fix(jobs: Path, check: str | None) -> None:
    """The job's converters fixed: the check is ``check``, or gone."""
    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["converters"] = [] if check is None else [{"type": "check", "expr": check, "reason": "negative amount"}]
    path.write_text(yaml.safe_dump(job))


def _marked(wh: Path) -> list[str]:
    table = wh / "_engine" / "replayed"
    if not (table / "_delta_log").exists():
        return []
    return sorted(DeltaTable(str(table)).to_pyarrow_table().column("record_id").to_pylist())


def _error_rows(wh: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(wh / "_errors" / JOB)).to_pyarrow_table().to_pylist()


def _live(wh: Path) -> dict[str, Any]:
    return {d: v for d, v in watermarks(wh).items() if not d.startswith("replay:")}


def _sinks_hold(wh: Path, ids: list[int]) -> None:
    found = sink_ids(wh)
    for sink in ("delta", "parquet", "avro", "json"):
        assert found[sink] == sorted(ids), f"{sink}: {sorted(set(found[sink]) ^ set(ids))[:20]}"


@pytest.fixture
def rejected(spark: Any, tmp_path: Path) -> tuple[Path, Path, Inputs]:
    """A job run once: its sinks hold the good records, its error table the bad ones."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    inputs = Inputs(wh)
    inputs.add("a", 30)
    inputs.add("b", 26)
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert sink_ids(wh)["errors"] == inputs.bad
    return wh, jobs, inputs


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_replay_publishes_what_passes_now_once_and_leaves_the_rest(rejected: tuple[Path, Path, Inputs]) -> None:
    wh, jobs, inputs = rejected
    live = _live(wh)
    _fix(jobs, EVEN_PASS)
    even = [i for i in inputs.bad if i % 2 == 0]
    odd = [i for i in inputs.bad if i % 2]

    code, shown = run_here(jobs, wh, "mode=replay", "replay.dry_run=true")
    assert code == 0, shown
    assert shown["replayable"] == [
        {"name": JOB, "error_table": str(wh / "_errors" / JOB), "rows": len(inputs.bad), "by_step": {"check": 8}}
    ]
    assert _marked(wh) == []  # a dry run writes nothing

    code, summary = run_here(jobs, wh, "mode=replay")
    assert (code, summary["status"], summary["mode"]) == (0, "SUCCEEDED", "replay"), summary
    (dag,) = summary["dags"]
    assert (dag["records_read"], dag["records_rejected"]) == (len(inputs.bad), len(odd)), dag
    _sinks_hold(wh, inputs.good + even)
    rows = _error_rows(wh)
    assert sorted(json.loads(r["record"])["id"] for r in rows) == inputs.bad  # nothing added, nothing removed
    ids = {json.loads(r["record"])["id"]: r["record_id"] for r in rows}
    assert _marked(wh) == sorted(ids[i] for i in even)
    assert _live(wh) == live  # the source's watermarks did not move

    code, again = run_here(jobs, wh, "mode=replay")  # the marked rows are never read again
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    assert again["dags"][0]["records_read"] == len(odd)
    _sinks_hold(wh, inputs.good + even)

    _fix(jobs, None)  # a second fix: the rest pass
    code, last = run_here(jobs, wh, "mode=replay")
    assert (code, last["status"]) == (0, "SUCCEEDED"), last
    _sinks_hold(wh, inputs.ids)
    assert _marked(wh) == sorted(ids.values())
    code, idle = run_here(jobs, wh, "mode=replay", "replay.dry_run=true")
    assert idle["replayable"][0]["rows"] == 0

    inputs.add("a", 10)  # the live job goes on where it was
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    _sinks_hold(wh, inputs.ids)


# The replay's sequence (sinks in name order): 1 av, 2 js, 3 lake (Delta), 4 pq, 5 the marks
# (_engine/replayed), then the staging deleted and the replay's watermark set.
@pytest.mark.crash
@pytest.mark.parametrize("point", ["after_plan_saved", "after_step:3", "after_step:5"])
def test_a_replay_killed_then_run_again_publishes_each_record_once(
    rejected: tuple[Path, Path, Inputs], point: str
) -> None:
    wh, jobs, inputs = rejected
    _fix(jobs, EVEN_PASS)
    even = [i for i in inputs.bad if i % 2 == 0]
    crashed = crash_run(jobs, wh, kill_at=point, extra=["mode=replay"])
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"

    if point == "after_plan_saved":  # the live job runs in between: a later batch takes its number
        inputs.add("b", 8)
        code, live = run_here(jobs, wh)
        assert (code, live["status"]) == (0, "SUCCEEDED"), live
    code, rerun = run_here(jobs, wh, "mode=replay")  # repairs the crashed replay, or replays anew
    assert (code, rerun["status"]) == (0, "SUCCEEDED"), rerun
    code, again = run_here(jobs, wh, "mode=replay")
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    assert again["dags"][0]["records_read"] == len([i for i in inputs.bad if i % 2])  # the odd ones, still
    _sinks_hold(wh, inputs.good + even)
    ids = {json.loads(r["record"])["id"]: r["record_id"] for r in _error_rows(wh)}
    assert _marked(wh) == sorted(ids[i] for i in even)
    assert not list(wh.rglob("_engine_staging"))


def test_replay_refuses_what_it_cannot_do_before_writing_anything(rejected: tuple[Path, Path, Inputs]) -> None:
    wh, jobs, _ = rejected
    before = sink_ids(wh)
    code, unknown = run_here(jobs, wh, "mode=replay", "replay.dag=nope")
    assert (code, unknown["status"]) == (2, "CONFIG_ERROR"), unknown
    assert "replay.dag" in unknown["message"] and "no records DAG `nope`" in unknown["message"]

    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["sinks"]["lake"]["mode"] = "overwrite"
    path.write_text(yaml.safe_dump(job))
    code, overwrite = run_here(jobs, wh, "mode=replay")
    assert (code, overwrite["status"]) == (2, "CONFIG_ERROR"), overwrite
    assert "sinks.lake.mode" in overwrite["message"] and "replayed records alone" in overwrite["message"]
    assert sink_ids(wh) == before
    assert not (wh / "_engine" / "replayed").exists()


def test_a_record_that_did_not_parse_is_replayed_with_the_fixed_schema(spark: Any, tmp_path: Path) -> None:
    """A value that did not fit the source's schema (step ``read``) is stored as the line read;
    with the schema and a converter fixed, the replay parses it again from that text."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    src = wh / "in" / "a"
    src.mkdir(parents=True)
    lines = ['{"id": 1, "day": "2026-11-01", "amount": 2.5}', '{"id": 2, "day": "2026-11-02", "amount": "3,5"}']
    (src / "part-1.json").write_text("\n".join([*lines, '{"id": 3, "day": "2026-11-03", "amount": "n/a"}']) + "\n")
    code, summary = run_here(jobs, wh)
    assert (code, summary["dags"][0]["records_rejected"]) == (0, 2), summary
    rows = _error_rows(wh)
    assert {r["step"] for r in rows} == {"read"}
    assert {r["record"] for r in rows} == {lines[1], '{"id": 3, "day": "2026-11-03", "amount": "n/a"}'}

    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["sources"]["in"]["schema"] = "id BIGINT, day STRING, amount STRING"  # read the text, then convert it
    job["converters"] = [
        {"type": "derive", "columns": {"amount": "try_cast(replace(amount, ',', '.') AS DOUBLE)"}},
        {"type": "check", "expr": "amount IS NOT NULL", "reason": "no amount"},
    ]
    path.write_text(yaml.safe_dump(job))
    code, replayed = run_here(jobs, wh, "mode=replay", "replay.step=read")
    assert (code, replayed["status"]) == (0, "SUCCEEDED"), replayed
    assert (replayed["dags"][0]["records_read"], replayed["dags"][0]["records_rejected"]) == (2, 1)
    lake = DeltaTable(str(wh / "out" / "lake")).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["amount"]) for r in lake) == [(1, 2.5), (2, 3.5)]


def test_a_timestamp_comes_back_to_the_microsecond(spark: Any, tmp_path: Path) -> None:
    """A record rejected after the read is stored as the JSON of the record as read: its
    timestamps keep their microseconds, so the replay publishes the values the source read."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.json").write_text(
        '{"id": 1, "at": "2026-01-01T10:00:00.654321Z", "amount": -1}\n'
        '{"id": 2, "at": "2026-01-01T11:00:00Z", "amount": 2}\n'
    )
    job = {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(land),
                "schema": "id BIGINT, at TIMESTAMP, amount DOUBLE",
            }
        },
        "converters": [{"type": "check", "expr": "amount >= 0", "reason": "negative"}],
        "sinks": {"lake": {"type": "delta", "path": "lake"}},
    }
    jobs.mkdir()
    (jobs / "ts.yaml").write_text(yaml.safe_dump(job))
    code, summary = run_here(jobs, wh, "spark.conf={spark.sql.session.timeZone:UTC}", job="ts")
    assert (code, summary["dags"][0]["records_rejected"]) == (0, 1), summary
    job["converters"] = []
    (jobs / "ts.yaml").write_text(yaml.safe_dump(job))
    code, replayed = run_here(jobs, wh, "mode=replay", "spark.conf={spark.sql.session.timeZone:UTC}", job="ts")
    assert (code, replayed["status"]) == (0, "SUCCEEDED"), replayed
    lake = {r["id"]: r["at"] for r in DeltaTable(str(wh / "lake")).to_pyarrow_table().to_pylist()}
    assert lake[1].microsecond == 654321 and lake[1].second == 0 and lake[1].hour == 10, lake


def test_a_skipped_files_row_is_not_replayed_as_a_record(spark: Any, tmp_path: Path) -> None:
    """``on_corrupt = skip`` keeps a row naming the file it could not read: it is no record, so a
    replay leaves it out (read as one, it would pass as a record of nulls)."""
    import gzip

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["sources"]["in"]["on_corrupt"] = "skip"
    path.write_text(yaml.safe_dump(job))
    land = wh / "in" / "a"
    land.mkdir(parents=True)
    (land / "part-1.json").write_text('{"id": 1, "day": "2026-11-01", "amount": -2.5}\n')
    data = gzip.compress(b"".join(b'{"id": %d, "day": "2026-11-01", "amount": 1.0}\n' % i for i in range(2, 2000)))
    (land / "part-2.json.gz").write_bytes(data[: len(data) // 2])  # truncated: it cannot be read
    code, summary = run_here(jobs, wh)
    assert code == 0, summary
    assert sorted(r["step"] for r in _error_rows(wh)) == ["check", "read"]
    _fix(jobs, None)
    code, shown = run_here(jobs, wh, "mode=replay", "replay.dry_run=true")
    assert shown["replayable"][0]["by_step"] == {"check": 1}, shown
    code, replayed = run_here(jobs, wh, "mode=replay")
    assert (code, replayed["dags"][0]["records_read"]) == (0, 1), replayed
    lake = DeltaTable(str(wh / "out" / "lake")).to_pyarrow_table()
    assert lake.column("id").to_pylist() == [1], "no record of nulls"


def _edit(jobs: Path, change: Any) -> None:
    """The job file changed in place by ``change(job)``."""
    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    change(job)
    path.write_text(yaml.safe_dump(job))


def _refused(jobs: Path, wh: Path, key: str, said: str, *extra: str) -> None:
    code, summary = run_here(jobs, wh, "mode=replay", *extra)
    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), summary
    assert key in summary["message"] and said in summary["message"], summary["message"]


def test_replay_refuses_a_dag_it_cannot_read_back_before_planning(spark: Any, tmp_path: Path) -> None:
    """No error table to read, a schema it could only infer again from every input, a schema its
    stored records cannot be parsed with: each a config error naming the key, nothing written."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, other_dag=True)
    _edit(jobs, lambda job: job["dags"]["other"].update(errors={"enabled": False}))
    _refused(jobs, wh, "replay.dag", "dag other has no error table", "replay.dag=other")
    _edit(jobs, lambda job: job["dags"][JOB].update(errors={"enabled": False}))
    _refused(jobs, wh, "replay.dag", f"no DAG of job {JOB} has an error table")

    write_job(jobs, wh)  # one DAG, its schema inferred
    _edit(jobs, lambda job: job["sources"]["in"].pop("schema"))
    _refused(jobs, wh, "sources.in.schema", "none was pinned yet")
    inputs = Inputs(wh)
    inputs.add("a", 20)
    code, summary = run_here(jobs, wh)  # pins the inferred schema
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    _edit(jobs, lambda job: job["sources"]["in"].update(options={"primitivesAsString": "true"}))
    _refused(jobs, wh, "sources.in.schema", "reader options changed since it was pinned")

    _edit(jobs, lambda job: job["sources"]["in"].update(schema="id BIGINT, day STRING, tags MAP<INT, STRING>"))
    _refused(jobs, wh, "sources.in.schema", "can only contain STRING as a key type")
    assert not (wh / "_engine" / "replayed").exists()
    assert sink_ids(wh)["delta"] == inputs.good  # the live run's, nothing more


@pytest.mark.crash
@pytest.mark.postgres
def test_a_live_batch_left_unfinished_is_finished_by_a_replay_with_its_database_error_sink(
    spark: Any, tmp_path: Path, postgres: Any
) -> None:
    """A replay leaves out the ``from = error`` sinks, yet finishes the DAG's live batch a crash left
    half published, which writes one: that sink's login still reaches its commit step."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    table = f"rejected_{tmp_path.name[-12:].replace('-', '_').lower()}"
    postgres.psql(
        f"CREATE TABLE {table} (job TEXT, dag TEXT, run_id TEXT, source TEXT, step TEXT, reasons TEXT[], "
        "record TEXT, error_time TIMESTAMP)"
    )
    held = f"SELECT (record::json->>'id')::int FROM {table} ORDER BY 1"
    write_job(jobs, wh)
    bad = {"type": "jdbc", "url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    _edit(jobs, lambda job: job["sinks"].update(bad={**bad, "table": table, "from": "error"}))
    inputs = Inputs(wh)
    inputs.add("a", 30)
    crashed = crash_run(jobs, wh, kill_at="after_step:1")  # 1 av; 2 bad, 3 js, ... left to do
    assert crashed.returncode == -9, f"not killed: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"

    _fix(jobs, None)
    code, summary = run_here(jobs, wh, "mode=replay")  # finishes the live batch first
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert [int(i) for i in postgres.psql(held).split()] == inputs.bad  # by the live batch, once
    _sinks_hold(wh, inputs.ids)  # the good ones by the live batch, the bad ones replayed
    code, again = run_here(jobs, wh)
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    assert [int(i) for i in postgres.psql(held).split()] == inputs.bad
