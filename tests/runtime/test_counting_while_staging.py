"""A run of one dataset counts its records while its first sink writes them: one pass over the
input, no job that only counts. The counts must be exactly those a separate count would give, a
sink whose branch turns out empty must publish nothing, and a read that fails mid-write must leave
nothing in the sink's table (the run then reads again the usual way, which names the failure)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from engine.state.delta_store import DeltaMetadataStore
from tests.helpers import delta_ids, run_dict, run_with, write_jsonl
from tests.sqllog import SqlLog

DDL = "id BIGINT, amount STRING, email STRING"


def _rows(n: int) -> list[dict[str, Any] | str]:
    """``n`` records: every 7th malformed, every 5th (of the rest) a negative amount, and every id
    divisible by 11 twice (the second copy is a duplicate that ``dedupe`` drops)."""
    rows: list[dict[str, Any] | str] = []
    for i in range(n):
        if i % 7 == 3:
            rows.append('{"id": ')
            continue
        amount = -i if i % 5 == 1 else i * 10
        rows.append({"id": i, "amount": str(amount), "email": f"u{i}@example.com"})
        if i % 11 == 0:
            rows.append({"id": i, "amount": str(amount), "email": f"again{i}@example.com"})
    return rows


def _job(inbox: Path, sinks: dict[str, Any]) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(inbox), "schema": DDL}},
        "converters": [
            {"type": "cast", "columns": {"amount": "decimal(12,2)"}},
            {"type": "check", "name": "non_negative", "expr": "amount >= 0", "reason": "negative"},
            {"type": "dedupe", "keys": ["id"], "order_by": ["email"]},
        ],
        "forks": {"big": "amount >= 300"},
        "sinks": sinks,
    }


def _expected(rows: list[dict[str, Any] | str]) -> dict[str, int]:
    """The counts worked out from the input in Python, independently of the engine."""
    records = [r for r in rows if isinstance(r, dict)]
    good = [r for r in records if int(r["amount"]) >= 0]
    ids = {r["id"] for r in good}
    return {
        "read": len(rows),
        "rejected": (len(rows) - len(records)) + (len(records) - len(good)),
        "dropped": len(good) - len(ids),
        "valid": len(ids),
        "big": len({r["id"] for r in good if int(r["amount"]) >= 300}),
    }


SINKS = {
    "lake": {"type": "delta", "path": "lake"},
    "big": {"type": "parquet", "from": "big", "path": "big"},
}


def test_counts_taken_while_the_first_sink_writes_are_those_of_the_input(spark: Any, lake: Path) -> None:
    rows = _rows(400)
    inbox = write_jsonl(lake.parent / "in" / "orders.json", rows).parent
    want = _expected(rows)
    log = SqlLog(spark)

    result, _ = run_dict(spark, _job(inbox, SINKS), lake)

    (dag,) = result.dags
    assert (dag.records_read, dag.records_rejected, dag.records_dropped) == (
        want["read"],
        want["rejected"],
        want["dropped"],
    )
    assert dag.sinks == {"lake": want["valid"], "big": want["big"]}
    assert len(delta_ids(lake / "lake")) == want["valid"]
    assert ds.dataset(lake / "big", format="parquet").count_rows() == want["big"]
    assert DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_dataset().count_rows() == want["rejected"]
    # The input was scanned by the job writing the Delta sink, and by no job that only counts.
    scans = _reading(log, inbox)
    assert len(scans) == 1
    assert any(n.name.startswith("CollectMetrics") for n in scans[0].nodes)
    assert not any(n.name in ("HashAggregate", "ObjectHashAggregate") for n in scans[0].nodes)
    # They are counted where the cache is read, from its packed engine columns: no projection of
    # the unpacked ones beneath the observation (Spark would build each row there, one by one).
    beneath = scans[0].tree_between("CollectMetrics", "InMemoryTableScan")
    assert beneath[-1:] and "InMemoryTableScan" in beneath[-1], scans[0].plan
    assert not any("Project" in line for line in beneath), "\n".join(beneath)


def _reading(log: SqlLog, inbox: Path) -> list[Any]:
    """The executions that read files of ``inbox`` (not those whose plan only shows the cached read)."""
    here = f"{inbox.parent.name}/{inbox.name}"  # a plan's description abbreviates long paths

    def reads_input(n: Any) -> bool:
        return n.name.startswith("Scan json") and here in n.desc and n.metrics.get("number of files read", "0") != "0"

    return [e for e in log.executions() if any(reads_input(n) for n in e.nodes)]


def test_a_branch_naming_an_engine_column_is_counted_in_the_same_pass(spark: Any, lake: Path) -> None:
    """A named branch may read an engine column by name (here the rules that warned of a record).
    The cache packs those columns, so this count reads them unpacked, still in the one pass."""
    rows = _rows(400)
    inbox = write_jsonl(lake.parent / "in" / "orders.json", rows).parent
    job = _job(inbox, SINKS)
    job["converters"].append({"type": "check", "name": "under_1000", "expr": "amount < 1000", "action": "warn"})
    job["forks"] = {"big": "array_contains(__engine_warnings, 'under_1000')"}
    want = _expected(rows)
    good = [r for r in rows if isinstance(r, dict) and int(r["amount"]) >= 0]
    warned = len({r["id"] for r in good if int(r["amount"]) >= 1000})
    log = SqlLog(spark)

    result, _ = run_dict(spark, job, lake)

    (dag,) = result.dags
    assert (dag.records_read, dag.records_rejected) == (want["read"], want["rejected"])
    assert dag.sinks == {"lake": want["valid"], "big": warned} and 0 < warned < want["valid"]
    assert ds.dataset(lake / "big", format="parquet").count_rows() == warned
    (scan,) = _reading(log, inbox)
    assert any(n.name.startswith("CollectMetrics") for n in scan.nodes), "not counted while the sink wrote"


@pytest.mark.parametrize("first", ["delta", "parquet"])
def test_a_sink_whose_branch_turns_out_empty_publishes_nothing_and_leaves_nothing(
    spark: Any, lake: Path, first: str
) -> None:
    """Every record is rejected: the sink staged while reading is thrown away, as if never staged."""
    inbox = write_jsonl(lake.parent / "in" / "bad.json", [{"id": i, "amount": "-1"} for i in range(20)]).parent
    sinks = dict(sorted(SINKS.items(), key=lambda kv: kv[1]["type"] != first))
    sinks["big"] = {**sinks["big"], "from": "valid"}

    result, _ = run_dict(spark, _job(inbox, sinks), lake)

    assert result.summary()["status"] == "SUCCEEDED"
    assert result.dags[0].sinks == {"lake": 0, "big": 0}
    assert _files(lake / "lake") == _files(lake / "big") == []
    assert DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_dataset().count_rows() == 20

    good = write_jsonl(lake.parent / "in2" / "good.json", [{"id": i, "amount": "5"} for i in range(3)]).parent
    again, _ = run_dict(spark, _job(good, sinks), lake)
    assert again.summary()["status"] == "SUCCEEDED"
    assert delta_ids(lake / "lake") == [0, 1, 2]
    assert sorted(ds.dataset(lake / "big", format="parquet").to_table().column("id").to_pylist()) == [0, 1, 2]


def _files(root: Path) -> list[str]:
    """Every file under ``root`` (staging and scratch included), relative to it."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _gz(ids: range) -> bytes:
    return gzip.compress("".join(json.dumps({"id": i, "amount": "1"}) + "\n" for i in ids).encode())


def test_a_read_failing_while_the_sink_writes_leaves_its_table_as_it_was(spark: Any, lake: Path) -> None:
    """The first file is read and written before the truncated one fails the job: none of its
    files may stay in the table's directory, and the run fails naming the file, as it would had
    it counted first."""
    land = lake.parent / "land"
    land.mkdir(parents=True)
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    (land / "a.json.gz").write_bytes(_gz(range(0, 5)))
    job = _job(land, {"lake": {"type": "delta", "path": "lake"}})
    job["converters"] = job["converters"][:2]  # no dedupe: no shuffle, each file's task writes as it reads
    job["sources"]["in"]["path"] = str(land / "*.json.gz")
    assert run_with(spark, job, lake, store, run=1).summary()["status"] == "SUCCEEDED"
    before = _files(lake / "lake")
    (land / "b.json.gz").write_bytes(_gz(range(5, 2_000)))  # read to its end well before c fails
    whole = _gz(range(20_000, 100_000))
    (land / "c.json.gz").write_bytes(whole[: len(whole) // 2])

    result = run_with(spark, job, lake, store, run=2)

    assert result.summary()["status"] == "FAILED"
    (outcome,) = result.dags[0].datasets
    assert "c.json.gz" in outcome.message and "on_corrupt = skip" in outcome.message
    assert _files(lake / "lake") == before
    assert delta_ids(lake / "lake") == list(range(5))
