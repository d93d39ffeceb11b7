"""Guards on the shape of a run's Spark work, read from Spark's own SQL status store (no timing):
a regression that doubles a run's cost (a second scan of the input, a pass per sink, a Python
UDF, a stray shuffle) fails here although every output stays right."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_dict, write_jsonl
from tests.sqllog import Execution, SqlLog


def _rows(n: int, *, bad_every: int = 7) -> list[dict[str, Any] | str]:
    rows: list[dict[str, Any] | str] = []
    for i in range(n):
        if i % bad_every == 3:
            rows.append('{"id": ')  # malformed
        else:
            rows.append({"id": i, "amount": str(i * 10), "email": f"u{i}@example.com", "day": f"2026-01-0{i % 3 + 1}"})
    return rows


def _job(inbox: Any, sinks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(inbox), "schema": DDL}},
        "converters": [
            {"type": "require", "columns": ["id"]},
            {"type": "cast", "columns": {"amount": "decimal(12,2)"}},
            {"type": "check", "name": "positive", "expr": "amount >= 0", "reason": "negative"},
            {"type": "regex", "column": "email", "pattern": "[^@]+@[^@]+"},
            {"type": "derive", "columns": {"big": "amount >= 30"}},
            *extra.pop("converters", []),
        ],
        "forks": {"big": "big"},
        "sinks": sinks,
        **extra,
    }


DDL = "id BIGINT, amount STRING, email STRING, day STRING"
ONE_SINK = {"lake": {"type": "delta", "path": "lake"}}
THREE_SINKS = {
    "lake": {"type": "delta", "path": "lake"},
    "copy": {"type": "delta", "path": "copy"},
    "big": {"type": "parquet", "from": "big", "path": "big"},
}


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Execution]]]:
    """The executions of one run of each job shape (run once for the module's guards), by shape,
    with the input directory it read."""
    out = {}
    shapes = {
        "one sink": _job(..., ONE_SINK),
        "three sinks": _job(..., THREE_SINKS),
        "sole sink": _job(..., ONE_SINK, errors={"enabled": False}),
        "dedupe and partitions": _job(
            ...,
            {"lake": {"type": "delta", "path": "lake", "partition_by": ["day"]}},
            converters=[{"type": "dedupe", "keys": ["email"], "order_by": ["id DESC"]}],
        ),
    }
    for shape, job in shapes.items():
        root = tmp_path_factory.mktemp(shape.replace(" ", "_"))
        inbox = root / "inbox"
        for k in range(3):
            write_jsonl(inbox / f"part-{k}.json", _rows(20))
        job["sources"]["in"]["path"] = str(inbox)
        (root / "lake").mkdir()
        log = SqlLog(spark)
        result, _ = run_dict(spark, job, root / "lake")
        assert result.status == "SUCCEEDED", result.summary()
        out[shape] = (inbox, log.executions())
    return out


@pytest.mark.parametrize("shape", ["one sink", "three sinks", "dedupe and partitions", "sole sink"])
def test_the_input_is_scanned_once_whatever_the_sinks_and_forks(runs: Any, shape: str) -> None:
    """Every sink and the error table read the persisted frame: the files are read by one scan."""
    inbox, executions = runs[shape]
    here = f"{inbox.parent.name}/{inbox.name}/part-"  # a plan's description abbreviates long paths
    scans = [
        n.metrics["number of files read"]
        for e in executions
        for n in e.nodes
        if n.name.startswith("Scan json") and here in n.desc and n.metrics.get("number of files read", "0") != "0"
    ]  # (the cached plan's scan shows again, reading nothing, under each read of the cache)
    assert scans == ["3"]


def test_a_run_of_one_group_runs_a_stated_number_of_spark_jobs(runs: Any) -> None:
    """One work-unit group, one Delta sink, a first run: 7 Spark jobs. The sink's staging is 1: it
    reads the input, fills the persisted cache and counts every branch while it writes (no pass
    that only counts); the error table's staging 2 (record ids: a window over the rejected rows);
    the other 4 are Delta's, committing the batch that creates the sink's table (the checksum it
    derives lists the files of the table before, empty, with Spark jobs). The error table costs no
    more: the engine creates it with its checksum, and while it holds no rows there are no ids to
    read back. Each further sink adds its staging only, and no pass over the input: one job for the
    second Delta sink, one for the Parquet sink, one of Delta's listing the second new table's
    (empty) files."""
    jobs = {shape: sum(e.jobs for e in runs[shape][1]) for shape in ("one sink", "three sinks")}
    assert jobs["one sink"] <= 7
    assert jobs["three sinks"] - jobs["one sink"] == 3


def test_records_that_only_one_sink_reads_are_not_persisted(runs: Any) -> None:
    """Persisting the converted records pays for a second reader: with one sink, no error table
    (and no replay), the sink's staging is their only reader, so nothing is cached: Spark runs the
    cache's fill as a job of its own and the sink's pass then reads it back (issue 26's
    ``apply_changes`` bench: ~0.5 s of a 3.5 s run). The input is still read once (above)."""
    cached = {shape: [e.id for e in runs[shape][1] if "InMemoryRelation" in e.plan] for shape in runs}
    assert cached["sole sink"] == []
    assert cached["one sink"], "the error table reads the persisted records"
    jobs = {shape: sum(e.jobs for e in runs[shape][1]) for shape in ("one sink", "sole sink")}
    assert jobs["sole sink"] < jobs["one sink"]


@pytest.mark.parametrize("shape", ["one sink", "three sinks", "dedupe and partitions"])
def test_the_read_and_every_step_run_as_one_piece_of_generated_code(runs: Any, shape: str) -> None:
    """Every node from the scan to the persisted frame is whole-stage generated (``*`` in the plan).
    An expression without generated code (``from_json``, a lambda) takes its projection out of the
    stage: every record then pays for all that projection computes (the original record's struct,
    the reasons), not only the rejected ones (issue 20: ~10% of the ingest's CPU)."""
    trees = [e.tree_between("InMemoryRelation", "Scan json") for e in runs[shape][1]]
    steps = [line for tree in trees for line in _projections_over_the_scan(tree)]
    assert steps, trees  # the plan did show the persisted frame
    assert [line for line in steps if "+- * " not in line] == []


def _projections_over_the_scan(tree: list[str]) -> list[str]:
    """The Project lines right above the tree's last line (the scan), up to any other node (a
    dedupe's shuffle, the cache)."""
    above = list(reversed(tree[:-1]))
    end = next((i for i, line in enumerate(above) if " Project (" not in line), len(above))
    return above[:end]


@pytest.mark.parametrize("shape", ["one sink", "three sinks", "dedupe and partitions"])
def test_the_persisted_frame_holds_the_data_and_one_column_of_the_engines(runs: Any, shape: str) -> None:
    """A cache stores every column it is given for every record, constant or null. The engine's
    columns (errors, the original record, its file, the dropped mark) are one struct there, null
    for a valid record: four columns of it cost the 1M-record ingest ~3% of its time (issue 20)."""
    cached = {cols for e in runs[shape][1] for cols in _cached_columns(e.plan)}
    assert cached == {("id", "amount", "email", "day", "big", "__engine_internals")}


def _cached_columns(plan: str) -> list[tuple[str, ...]]:
    """The columns of each persisted relation in a formatted plan (``Arguments: [id#1L, ...]``)."""
    found = re.findall(r"InMemoryRelation\s*\nArguments: \[([^\]]*)\]", plan)
    return [tuple(c.strip().split("#")[0] for c in args.split(",")) for args in found]


PYTHON = ("EvalPython", "PythonUDF", "InPandas", "PythonMap", "FlatMapGroupsInPython")


@pytest.mark.parametrize("shape", ["one sink", "three sinks", "dedupe and partitions"])
def test_no_python_runs_in_the_plans_of_built_in_steps(runs: Any, shape: str) -> None:
    names = {n.name for e in runs[shape][1] for n in e.nodes}
    assert not [n for n in names if any(p in n for p in PYTHON)]


@pytest.mark.parametrize("shape", ["one sink", "three sinks", "dedupe and partitions"])
def test_no_shuffle_but_what_dedupe_partitioning_and_the_error_table_need(runs: Any, shape: str) -> None:
    """Records are shuffled only by a dedupe's keys or a sink's partition columns. Allowed besides:
    the counts' partial aggregates (a row per task, to one partition), the error table's rejected
    rows by record digest, and Delta's own jobs over its transaction log."""
    executions = runs[shape][1]
    allowed = ("SinglePartition", "__engine_record_digest", "add_path_canonical", "REPARTITION_BY_NUM")
    if shape == "dedupe and partitions":
        allowed += ("hashpartitioning(email", "hashpartitioning(day")
    shuffles = [n.desc for e in executions for n in e.nodes if n.name == "Exchange"]
    assert shuffles, "no shuffle at all: the guard would not see one"
    assert [d for d in shuffles if not any(a in d for a in allowed)] == []
    if shape == "dedupe and partitions":
        assert any("hashpartitioning(email" in d for d in shuffles)
