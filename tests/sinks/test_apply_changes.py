"""``mode = apply_changes`` on real Spark and Delta, run by the CLI three times over a change
stream of 10,500 events on 1,000 keys (updates, deletes, late events, several events of a key in
one batch, exact repeats and ties, which are rejected), each table read with delta-rs after each run and
compared with the same rules computed here in plain Python: SCD1 with hard and with soft deletes, and SCD2."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from engine.commit.apply_changes import Changes
from engine.commit.batch import BatchRef
from engine.commit.steps import RecordTombstones
from engine.errors import ConfigError
from engine.sinks.delta import stage_delta
from engine.storage.hadoop import HadoopFs
from tests.commit.harness import crash_run, run_here
from tests.helpers import compile_dict

KEYS = 1000
PER_RUN = 3500
COLUMNS = ("id", "seq", "op", "name", "amount")
SCHEMA = "id BIGINT, seq BIGINT, op STRING, name STRING, amount DOUBLE"
Event = dict[str, Any]


def change_stream(run: int, rng: random.Random) -> list[Event]:
    """One run's events: mostly newer than every earlier run's, a tenth late (older than what
    the table may hold), 15% deletes, and repeats and ties of events of the same batch."""
    events: list[Event] = []
    for i in range(PER_RUN):
        late = rng.random() < 0.1
        seq = rng.randrange(1, 10_000 * (run + 1)) if late else 10_000 * (run + 1) + 2 * i
        event = {
            "id": rng.randrange(KEYS),
            "seq": seq,
            "op": "D" if rng.random() < 0.15 else "U",
            "name": f"n{rng.randrange(100_000)}",
            "amount": rng.randrange(1_000_000) / 100,
        }
        events.append(event)
        tie = rng.random()
        if tie < 0.02:  # delivered twice
            events.append(dict(event))
        elif tie < 0.03:  # a delete and an upsert of one sequence
            events.append({**event, "op": "U" if event["op"] == "D" else "D"})
        elif tie < 0.04:  # two upserts of one sequence
            events.append({**event, "op": "U", "name": f"n{rng.randrange(100_000)}"})
    rng.shuffle(events)
    return events


def decided(batch: list[Event]) -> list[Event]:
    """The documented rule for events of one key and one sequence (``duplicates = reject``): an
    exact repeat is one event; events that differ are all rejected, none applied."""
    images: dict[tuple[int, int], set[tuple[Any, ...]]] = {}
    for e in batch:
        images.setdefault((e["id"], e["seq"]), set()).add(tuple(e[c] for c in COLUMNS))
    return [dict(zip(COLUMNS, next(iter(i)), strict=True)) for i in images.values() if len(i) == 1]


def rejected(batch: list[Event]) -> int:
    """How many of ``batch``'s events :func:`decided` rejects."""
    kept = {(e["id"], e["seq"]) for e in decided(batch)}
    return sum(1 for e in batch if (e["id"], e["seq"]) not in kept)


class Scd1:
    """The SCD1 table the rules give, batch after batch. A hard delete leaves its key's greatest
    delete sequence behind (a tombstone): an upsert not newer than it inserts nothing."""

    def __init__(self, *, soft: bool) -> None:
        self.soft = soft
        self.rows: dict[int, Event] = {}
        self.deleted: dict[int, int] = {}

    def apply(self, batch: list[Event]) -> None:
        last: dict[int, Event] = {}
        for e in decided(batch):
            held = last.get(e["id"])
            if held is None or e["seq"] > held["seq"]:
                last[e["id"]] = e
        for key, e in last.items():
            self._apply(key, e)
            if e["op"] == "D" and not self.soft:
                self.deleted[key] = max(self.deleted.get(key, e["seq"]), e["seq"])

    def _apply(self, key: int, e: Event) -> None:
        row = self.rows.get(key)
        if row is not None and e["seq"] <= row["seq"]:
            return  # a late event never overwrites
        if e["op"] != "D":
            if row is None and self.deleted.get(key, -1) >= e["seq"]:
                return  # older than the key's delete: it stays deleted
            self.rows[key] = {**e, "deleted_at": None} if self.soft else dict(e)
        elif not self.soft:
            self.rows.pop(key, None)
        elif row is not None:
            self.rows[key] = {**row, "seq": e["seq"], "deleted_at": e["seq"]}
        else:
            self.rows[key] = {**e, "deleted_at": e["seq"]}

    def expected(self) -> list[tuple[Any, ...]]:
        columns = (*COLUMNS, "deleted_at") if self.soft else COLUMNS
        return sorted(tuple(r[c] for c in columns) for r in self.rows.values())


class Scd2:
    """The SCD2 history the rules give: every key's events by sequence (the first one held for
    a sequence stays), each upsert a version to the next event; a delete that closes no version
    is forgotten once its batch is applied."""

    def __init__(self) -> None:
        self.history: dict[int, dict[int, Event]] = {}

    def apply(self, batch: list[Event]) -> None:
        for e in decided(batch):
            self.history.setdefault(e["id"], {}).setdefault(e["seq"], e)
        for events in self.history.values():  # the table keeps a delete as the end of the version it closes
            opened = False  # whether the event before is an upsert (a version the delete closes)
            for seq in sorted(events):
                if events[seq]["op"] == "D" and not opened:
                    del events[seq]
                else:
                    opened = events[seq]["op"] != "D"

    def expected(self) -> list[tuple[Any, ...]]:
        rows = []
        for events in self.history.values():
            ordered = [events[s] for s in sorted(events)]
            for i, e in enumerate(ordered):
                after = ordered[i + 1] if i + 1 < len(ordered) else None
                if e["op"] == "D":
                    continue
                to = after["seq"] if after else None
                rows.append((*(e[c] for c in COLUMNS), e["seq"], to, to is None))
        return sorted(rows, key=_sortable)


def _sortable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, v if v is not None else 0) for v in row)


def table_rows(path: Path, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The table's rows as delta-rs reads them (nulls as None)."""
    found = DeltaTable(str(path)).to_pyarrow_table(columns=list(columns)).to_pylist()
    return sorted(
        (tuple(None if isinstance(v, float) and math.isnan(v) else v for v in (r[c] for c in columns)) for r in found),
        key=_sortable,
    )


def write_job(jobs: Path, wh: Path, **sink: Any) -> None:
    job = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(wh / "in"), "schema": SCHEMA}},
        "sinks": {
            "table": {"type": "delta", "path": "customers", "mode": "apply_changes", "keys": ["id"], **sink},
        },
    }
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "crash.yaml").write_text(yaml.safe_dump(job))


def land(wh: Path, run: int, events: list[Event]) -> None:
    path = wh / "in" / f"part-{run:03d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    os.utime(path, (1_700_000_000 + run * 10,) * 2)


@pytest.mark.parametrize(
    ("sink", "model", "columns"),
    [
        ({"scd": 1}, lambda: Scd1(soft=False), COLUMNS),
        ({"scd": 1, "soft_delete": True}, lambda: Scd1(soft=True), (*COLUMNS, "deleted_at")),
        ({"scd": 2}, Scd2, (*COLUMNS, "valid_from", "valid_to", "is_current")),
    ],
    ids=["scd1", "scd1-soft", "scd2"],
)
@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_three_runs_of_a_change_stream_leave_what_the_rules_give(
    spark: Any, tmp_path: Path, sink: dict[str, Any], model: Any, columns: tuple[str, ...]
) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'", **sink)
    rng, reference = random.Random(26), model()
    for run in range(3):
        events = change_stream(run, rng)
        land(wh, run, events)
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
        assert summary["errors"] == rejected(events) > 0, "the events of one key and sequence that differ"
        reference.apply(events)
        got, want = table_rows(wh / "customers", columns), reference.expected()
        assert len(got) == len(want) and got == want, f"run {run + 1}: {len(got)} rows, {len(want)} expected"
        assert DeltaTable(str(wh / "customers")).version() == run, "one commit a run"
    if sink["scd"] == 2:  # history rows: at most one open version per key
        current = [r for r in got if r[-1]]
        assert len({r[0] for r in current}) == len(current) > 0


def test_a_run_again_after_its_commit_changes_nothing(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'", scd=2)
    land(wh, 0, change_stream(0, random.Random(7)))
    code, _ = run_here(jobs, wh)
    assert code == 0
    before = table_rows(wh / "customers", (*COLUMNS, "valid_from", "valid_to", "is_current"))
    code, summary = run_here(jobs, wh)  # nothing new: the same table, no commit
    assert code == 0, summary
    assert table_rows(wh / "customers", (*COLUMNS, "valid_from", "valid_to", "is_current")) == before
    assert DeltaTable(str(wh / "customers")).version() == 0


POINTS = ["after_staging", "after_sequence_written", "after_step:1", "after_step:2", "after_step:3", "before_done"]


@pytest.mark.crash
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_step_then_reruns_leave_the_table_the_rules_give(spark: Any, tmp_path: Path, point: str) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    rng, reference = random.Random(3), Scd1(soft=False)
    first, second = change_stream(0, rng), change_stream(1, rng)
    land(wh, 0, first)
    crashed = crash_run(jobs, wh, kill_at=point)
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    land(wh, 1, second)  # more changes land while the job is down
    for _ in range(2):
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    for batch in (first, second):
        reference.apply(batch)
    assert table_rows(wh / "customers", COLUMNS) == reference.expected()


@pytest.mark.parametrize(
    ("sink", "key", "says"),
    [
        ({}, "sinks.table", "needs `sequence_by`"),
        ({"sequence_by": "id"}, "sinks.table", "is one of the `keys`"),
        ({"sequence_by": "seq", "scd": 2, "soft_delete": True, "delete_when": "op = 'D'"}, "sinks.table", "scd = 1"),
        ({"sequence_by": "nope"}, "sinks.table.sequence_by", "which branch `valid` does not have"),
        ({"sequence_by": "seq", "delete_when": "opp = 'D'"}, "sinks.table.delete_when", "is not a condition"),
        ({"sequence_by": "seq", "delete_when": "upper(op)"}, "sinks.table.delete_when", "is string, not a condition"),
        ({"sequence_by": "seq", "delete_when": "op = 'D' AND"}, "sinks.table.delete_when", "is not a condition"),
        (
            {"sequence_by": "seq", "delete_when": "op = 'D'", "soft_delete": True, "tombstone_retention": "1d"},
            "sinks.table",
            "`tombstone_retention` is for mode `apply_changes` with `scd = 1`, `delete_when` and hard deletes",
        ),
        (
            {"sequence_by": "seq", "delete_when": "op = 'D'", "tombstone_retention": "soon"},
            "sinks.table.tombstone_retention",
            "`soon` is not a duration",
        ),
    ],
)
def test_mistakes_are_config_errors_naming_the_key(
    spark: Any, tmp_path: Path, sink: dict[str, Any], key: str, says: str
) -> None:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    land(tmp_path, 0, change_stream(0, random.Random(1))[:5])
    raw = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(tmp_path / "in"), "schema": SCHEMA}},
        "sinks": {"table": {"type": "delta", "path": "t", "mode": "apply_changes", "keys": ["id"], **sink}},
    }
    with pytest.raises(ConfigError) as raised:
        JobManager(spark).run(compile_dict(raw, tmp_path / "wh"), "run-1", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith(key), raised.value
    assert says in str(raised.value)
    assert not (tmp_path / "wh" / "t").exists()


def _event(key: int, seq: int, op: str = "U", name: str = "x") -> Event:
    return {"id": key, "seq": seq, "op": op, "name": name, "amount": 1.0}


def _tombstones(wh: Path) -> list[tuple[int, int]]:
    path = wh / "customers" / "_engine_tombstones"
    if not (path / "_delta_log").exists():
        return []
    return sorted(
        (r["id"], r["seq"]) for r in DeltaTable(str(path)).to_pyarrow_table(columns=["id", "seq"]).to_pylist()
    )


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_a_late_event_older_than_a_hard_delete_of_an_earlier_run_inserts_nothing(spark: Any, tmp_path: Path) -> None:
    """The delete of key 1 leaves a tombstone beside the table: a later run's event older than
    the delete is refused, a newer one inserts the key again. Spark and delta-rs read the table
    as if the tombstones were not in its directory."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    runs = [
        ([_event(1, 10, name="a"), _event(2, 10, name="b")], [(1, "a"), (2, "b")], []),
        ([_event(1, 20, "D"), _event(3, 5, "D")], [(2, "b")], [(1, 20), (3, 5)]),
        (
            [_event(1, 15, name="late"), _event(3, 5, name="same"), _event(4, 7, "D")],
            [(2, "b")],
            [(1, 20), (3, 5), (4, 7)],
        ),
        (
            [_event(1, 30, name="back"), _event(3, 6, name="newer"), _event(4, 3, "D")],
            [(1, "back"), (2, "b"), (3, "newer")],
            [(1, 20), (3, 5), (4, 3), (4, 7)],  # a late delete adds its own: the greatest counts
        ),
        ([_event(4, 5, name="still")], [(1, "back"), (2, "b"), (3, "newer")], [(1, 20), (3, 5), (4, 3), (4, 7)]),
    ]
    for run, (events, rows, tombstones) in enumerate(runs):
        land(wh, run, events)
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
        assert [(r[0], r[3]) for r in table_rows(wh / "customers", COLUMNS)] == rows, f"run {run + 1}"
        assert _tombstones(wh) == tombstones, f"run {run + 1}"
    assert spark.read.format("delta").load(str(wh / "customers")).count() == 3
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:  # neither VACUUM takes the tombstones for the table's unreferenced files
        spark.sql(f"VACUUM delta.`{wh / 'customers'}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    DeltaTable(str(wh / "customers")).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert _tombstones(wh) == runs[-1][2]


@pytest.mark.crash
@pytest.mark.parametrize("deletes", [False, True])
def test_a_crash_after_the_staging_is_deleted_replays_whether_the_batch_deleted_or_not(
    spark: Any, tmp_path: Path, deletes: bool
) -> None:
    """Steps: the table's MERGE, the tombstones, then the staging's removal (step 3): a replay
    past it must not read the staged events again, which are gone."""
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    land(wh, 0, [_event(1, 10), _event(2, 10), *([_event(2, 20, "D")] if deletes else [])])
    crashed = crash_run(jobs, wh, kill_at="after_step:3")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert not list((wh / "customers" / "_engine_staging").glob("*")), "killed after the staging went"
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    assert [r[0] for r in table_rows(wh / "customers", COLUMNS)] == ([1] if deletes else [1, 2])
    assert _tombstones(wh) == ([(2, 20)] if deletes else [])


def test_tombstones_kept_for_another_sequence_are_a_config_error_not_a_stuck_job(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    land(wh, 0, [_event(1, 10), _event(2, 20, "D")])
    assert run_here(jobs, wh)[0] == 0
    write_job(jobs, wh, sequence_by="amount", delete_when="op = 'D'")
    land(wh, 1, [_event(1, 30)])
    code, summary = run_here(jobs, wh)
    assert code == 2, summary
    assert "tombstones" in summary["message"] and "no amount" in summary["message"], summary["message"]
    assert "sinks.table.sequence_by" in summary["message"], summary["message"]
    assert DeltaTable(str(wh / "customers")).version() == 0, "nothing written"
    write_job(jobs, wh, sequence_by="amount", delete_when="op = 'D'", tombstone_retention=0)
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary


def test_tombstones_go_after_their_retention_with_a_later_delete(spark: Any, tmp_path: Path) -> None:
    import time

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'", tombstone_retention="1s")
    land(wh, 0, [_event(1, 10), _event(2, 10), _event(1, 20, "D")])
    assert run_here(jobs, wh)[0] == 0
    assert _tombstones(wh) == [(1, 20)]
    time.sleep(2)
    land(wh, 1, [_event(2, 20, "D")])  # its MERGE drops key 1's tombstone, recorded over 1 s ago
    assert run_here(jobs, wh)[0] == 0
    assert _tombstones(wh) == [(2, 20)]
    land(wh, 2, [_event(1, 15, name="late")])  # nothing refuses it any more
    assert run_here(jobs, wh)[0] == 0
    assert [(r[0], r[3]) for r in table_rows(wh / "customers", COLUMNS)] == [(1, "late")]

    none = tmp_path / "none"
    write_job(none / "jobs", none / "wh", sequence_by="seq", delete_when="op = 'D'", tombstone_retention=0)
    land(none / "wh", 0, [_event(1, 10), _event(1, 20, "D")])
    assert run_here(none / "jobs", none / "wh")[0] == 0
    assert not (none / "wh" / "customers" / "_engine_tombstones").exists()


def test_an_event_without_a_sequence_fails_the_run_naming_the_sink_and_key(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    rng = random.Random(5)
    land(wh, 0, change_stream(0, rng)[:200])
    assert run_here(jobs, wh)[0] == 0
    before = table_rows(wh / "customers", COLUMNS)
    unordered = [*change_stream(1, rng)[:200], {"id": 4242, "seq": None, "op": "U", "name": "x", "amount": 1.0}]
    land(wh, 1, unordered)
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (1, "FAILED"), summary
    (dag,) = summary["dags"]
    assert "sink `table`" in dag["message"] and "4242" in dag["message"], dag["message"]
    assert table_rows(wh / "customers", COLUMNS) == before, "nothing of the failed batch is published"
    assert DeltaTable(str(wh / "customers")).version() == 0


def test_validate_mode_refuses_a_bad_delete_condition_with_exit_2(spark: Any, tmp_path: Path) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="kind = 'D'")
    land(wh, 0, change_stream(0, random.Random(1))[:5])
    code, summary = run_here(jobs, wh, "mode=validate")
    assert code == 2, summary
    assert not (wh / "customers").exists()


def test_the_demo_applies_customer_changes_as_scd1_and_scd2(spark: Any, tmp_path: Path) -> None:
    """``jobs/demo/customers_cdc``: its two files in one run, checked by delta-rs against the
    events as its data files hold them."""
    from tests.commit.harness import REPO

    code, summary = run_here(REPO / "jobs", tmp_path, job="demo/customers_cdc")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    current = {r["customer_id"]: r for r in DeltaTable(str(tmp_path / "customers")).to_pyarrow_table().to_pylist()}
    assert sorted(current) == ["c001", "c003", "c004", "c005"]  # c002 deleted
    assert (current["c001"]["name"], current["c001"]["lsn"]) == ("Ada, Countess of Lovelace", 109)
    assert (current["c003"]["name"], current["c003"]["lsn"]) == ("Alan M. Turing", 108), "the late 106 lost to 108"

    history = DeltaTable(str(tmp_path / "customers_history")).to_pyarrow_table().to_pylist()
    versions = {(r["customer_id"], r["valid_from"]): (r["valid_to"], r["is_current"], r["name"]) for r in history}
    assert versions == {
        ("c001", 101): (104, False, "Ada Lovelace"),
        ("c001", 104): (109, False, "Ada King"),
        ("c001", 109): (None, True, "Ada, Countess of Lovelace"),
        ("c002", 102): (107, False, "Grace Hopper"),  # closed by its delete, none current
        ("c003", 103): (106, False, "Alan Turing"),
        ("c003", 106): (108, False, "A. Turing"),  # the late event, in its place
        ("c003", 108): (None, True, "Alan M. Turing"),
        ("c004", 105): (None, True, "Edsger Dijkstra"),  # delivered twice, one version
        ("c005", 110): (None, True, "Barbara Liskov"),
    }
    errors = DeltaTable(str(tmp_path / "_errors" / "customers_cdc")).to_pyarrow_table().to_pylist()
    assert [json.loads(e["record"])["name"] for e in errors] == ["A. M. Turing"]  # no lsn: rejected
    assert summary["dags"][0]["records_read"] == 12


@pytest.mark.parametrize("scd", [1, 2])
def test_a_new_column_in_a_later_batch_is_added_to_the_table(spark: Any, tmp_path: Path, scd: int) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'", scd=scd)
    land(wh, 0, [{"id": 1, "seq": 1, "op": "U", "name": "a", "amount": 1.0}])
    assert run_here(jobs, wh)[0] == 0
    job = yaml.safe_load((jobs / "crash.yaml").read_text())
    job["sources"]["in"]["schema"] = f"{SCHEMA}, tier STRING"
    (jobs / "crash.yaml").write_text(yaml.safe_dump(job))
    land(wh, 1, [{"id": 1, "seq": 2, "op": "U", "name": "b", "amount": 2.0, "tier": "gold"}])
    code, summary = run_here(jobs, wh)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    rows = sorted(DeltaTable(str(wh / "customers")).to_pyarrow_table().to_pylist(), key=lambda r: r["seq"])
    if scd == 1:
        assert [(r["seq"], r["name"], r["tier"]) for r in rows] == [(2, "b", "gold")]
    else:
        assert [(r["valid_from"], r["valid_to"], r["tier"]) for r in rows] == [(1, 2, None), (2, None, "gold")]


@pytest.mark.parametrize("with_deletes", [False, True])
def test_a_batchs_deletes_are_counted_while_it_is_staged(spark: Any, tmp_path: Path, with_deletes: bool) -> None:
    """The batch's deletes (after its events are reduced: one per key) are counted by the staging
    write itself: the step recording them knows there are some without a Spark job, and a batch
    without any has no such step."""
    op = "D" if with_deletes else "U"
    events = spark.createDataFrame(
        [(1, 1, "U"), (1, 2, op), (2, 5, op), (2, 5, op), (3, 1, "U")], "id BIGINT, seq BIGINT, op STRING"
    )
    changes = Changes(["id"], "seq", tombstone_seconds=3600.0)
    staged = stage_delta(
        changes.staged(events, delete_when="op = 'D'", sink="table"),
        BatchRef("j", "d", 1),
        HadoopFs(spark),
        sink="table",
        table=str(tmp_path / "customers"),
        app_id="engine:e:j:d:table",
        mode="apply_changes",
        keys=["id"],
        changes=changes,
    )
    steps = staged.steps
    assert [s.kind for s in steps] == (["delta_write", "record_tombstones"] if with_deletes else ["delta_write"])
    if with_deletes:
        assert isinstance(steps[1], RecordTombstones) and steps[1].deletes == 2


def test_tombstones_are_forgotten_at_most_once_per_retention(spark: Any, tmp_path: Path) -> None:
    """Forgetting is a DELETE and a VACUUM over the tombstones' log (Spark jobs: ~0.6 s a batch
    even when nothing is due), so it runs once the retention has passed since it last ran (kept
    beside the tombstones; the clock starts with their first batch): a tombstone is kept at least
    the retention, and less than twice it while batches delete."""
    from datetime import datetime, timezone

    path = str(tmp_path / "customers" / "_engine_tombstones")
    rows = [(1, 5, datetime(2020, 1, 1, tzinfo=timezone.utc)), (2, 6, datetime.now(timezone.utc))]
    spark.createDataFrame(rows, "id BIGINT, seq BIGINT, recorded_at TIMESTAMP").write.format("delta").save(path)
    changes, fs, t = Changes(["id"], "seq", tombstone_seconds=3600.0), HadoopFs(spark), 1_000_000.0

    def kept() -> tuple[list[int], int]:
        table = DeltaTable(path)
        return sorted(table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()), table.version()

    assert not changes.forget(spark, fs, path, now=t)  # no clock yet (an older engine's): it starts
    assert not changes.forget(spark, fs, path, now=t + 3599)
    assert kept() == ([1, 2], 0)
    assert changes.forget(spark, fs, path, now=t + 3600)
    assert kept()[0] == [2]  # the tombstone recorded over an hour ago (by Spark's clock) went
    after = kept()[1]
    assert not changes.forget(spark, fs, path, now=t + 3600 + 60)
    assert kept() == ([2], after)

    marker = Path(path) / "_engine_forgotten_at"
    marker.write_text("not a time")  # damaged: the clock starts again, nothing is forgotten on it
    assert not changes.forget(spark, fs, path, now=t + 7200)
    assert kept() == ([2], after)
    assert float(marker.read_text()) == t + 7200


def test_the_tombstones_refuse_upserts_by_a_broadcast_join_without_a_shuffle(spark: Any, tmp_path: Path) -> None:
    """A batch's upserts meet the tombstones of earlier batches in one anti join on them as they
    are: small (their Delta statistics say so), they are broadcast and neither side is shuffled
    (an aggregate of them first, as before, cost a shuffle of both: ~2 s of a 5 s batch in the
    bench with 20k tombstones). They are read as the files their checksum lists, with no Spark
    job over their log (~0.2 s a batch). The MERGE reads this source in each of its two passes:
    the staged files do not change, so Delta is told not to copy them first."""
    from tests.sqllog import SqlLog

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh, sequence_by="seq", delete_when="op = 'D'")
    land(wh, 0, [_event(1, 10), _event(2, 10), _event(2, 20, "D")])
    assert run_here(jobs, wh)[0] == 0
    land(wh, 1, [_event(2, 15, name="late"), _event(3, 1)])
    log = SqlLog(spark)
    assert run_here(jobs, wh)[0] == 0
    joins = [e for e in log.executions() if "LeftAnti" in e.plan]
    assert [r[0] for r in table_rows(wh / "customers", COLUMNS)] == [1, 3]  # the late upsert of 2 was refused
    assert len(joins) == 2, [e.plan for e in joins]  # the MERGE reads its source (not a copy) in its two passes
    for join in joins:
        below = _subtree(join.plan, "BroadcastHashJoin LeftAnti")
        assert below, join.plan
        assert [line for line in below if "Exchange" in line and "BroadcastExchange" not in line] == [], join.plan
    # read as the files their checksum lists: no Spark job builds their state from their log
    assert [e.id for e in log.executions() if "_engine_tombstones/_delta_log" in e.plan] == []


def _subtree(plan: str, node: str) -> list[str]:
    """The lines of the first ``node`` in a formatted plan's tree and of every node below it."""
    tree = plan.split("\n\n", 1)[0].splitlines()
    start = next((i for i, line in enumerate(tree) if node in line), None)
    if start is None:
        return []

    def depth(line: str) -> int:
        return len(line) - len(line.lstrip(" :+-|"))

    below = [tree[start]]
    for line in tree[start + 1 :]:
        if depth(line) <= depth(tree[start]):
            break
        below.append(line)
    return below
