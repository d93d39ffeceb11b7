"""A DAG's ``gates`` on real Spark and Delta: judged per dataset over its valid records in the
counting pass, a failed gate publishes nothing of that dataset (the DAG under ``full``), keeps its
watermark, and says what it saw in the summary and the JobStatus rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.state.store import InMemoryMetadataStore
from tests.helpers import compile_dict, delta_ids, json_job, run_dict, run_with, touch, write_jsonl

T0 = time.time() - 86_400


def landing(root: Path) -> Path:
    """Three directory datasets: ``d0`` and ``d2`` hold three records, ``d1`` only one."""
    for i, rows in enumerate((3, 1, 3)):
        touch(root / f"d{i}" / "part.json", [{"id": i * 100 + r} for r in range(rows)], mtime=T0 + i)
    return root


def job(root: Path, *, policy: str, gates: list[str]) -> dict[str, Any]:
    return {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(root / "*" / "*.json"),
                "datasets": "directory",
                "schema": "id INT",
            }
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
        "publish": {"policy": policy},
        "work_units": {"max_groups": 1},  # the three datasets in one group: the gate judges each alone
        "gates": gates,
    }


def test_a_failed_gate_under_partial_refuses_only_its_dataset_and_keeps_its_watermark(spark: Any, lake: Path) -> None:
    root = landing(lake.parent / "land")
    store = InMemoryMetadataStore()
    first = run_with(spark, job(root, policy="partial", gates=["count(*) >= 2"]), lake, store, run=1)

    assert first.status == "PARTIAL"
    assert delta_ids(lake / "out") == [0, 1, 2, 200, 201, 202]
    (dag,) = first.dags
    refused = [d for d in dag.datasets if d.status == "FAILED"]
    assert [d.unit.dataset.rsplit("/", 1)[1] for d in refused] == ["d1"]
    assert "gate `count(*) >= 2` failed: observed count(*) = 1" in refused[0].message
    rows = {r.dataset.rsplit("/", 1)[1]: r for r in store.job_status("t")}
    assert rows["d1"].status == "FAILED" and "observed count(*) = 1" in rows["d1"].message
    assert {d.rsplit("/", 1)[1] for d in store.load_state("t", "t")} == {"d0", "d2"}  # d1's watermark stays

    touch(root / "d1" / "more.json", [{"id": 150}], mtime=T0 + 10)
    second = run_with(spark, job(root, policy="partial", gates=["count(*) >= 2"]), lake, store, run=2)
    assert second.status == "SUCCEEDED", second.dags[0].message
    assert delta_ids(lake / "out") == [0, 1, 2, 100, 150, 200, 201, 202]  # d1 read again, whole


def test_a_failed_gate_under_full_publishes_nothing(spark: Any, lake: Path) -> None:
    root = landing(lake.parent / "land")
    store = InMemoryMetadataStore()
    result = run_with(spark, job(root, policy="full", gates=["count(*) >= 2"]), lake, store, run=1)
    assert result.status == "FAILED"
    statuses = sorted((d.unit.dataset.rsplit("/", 1)[1], d.status) for d in result.dags[0].datasets)
    assert statuses == [("d0", "ROLLED_BACK"), ("d1", "FAILED"), ("d2", "ROLLED_BACK")]
    assert not (lake / "out" / "_delta_log").exists() or delta_ids(lake / "out") == []
    assert store.load_state("t", "t") == {}


def test_gates_see_only_valid_records_and_report_what_they_saw(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i, "amount": i * 10} for i in range(5)])
    gates = ["count(*) > 0", "max(amount) < 30", "sum(amount) >= 0 AND min(id) >= 0"]
    steps = [{"type": "check", "expr": "id < 3"}]  # ids 3 and 4 (amounts 30, 40) are rejected
    passing, _ = run_dict(spark, json_job(src, steps, gates=gates), lake)
    assert passing.status == "SUCCEEDED", passing.dags[0].message
    assert delta_ids(lake / "out") == [0, 1, 2]

    everything_rejected = [{"type": "check", "expr": "id > 100"}]
    failing, _ = run_dict(spark, json_job(src, everything_rejected, gates=gates), lake / "none")
    message = failing.dags[0].message
    assert failing.status == "FAILED"
    assert "gate `count(*) > 0` failed: observed count(*) = 0" in message
    assert "gate `sum(amount) >= 0 AND min(id) >= 0` failed: observed null" in message
    assert "gate `max(amount) < 30` failed: observed max(amount) = null" in message  # null is not true


def test_a_comparison_with_an_expression_on_the_right_names_both_sides(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(4)])
    failing, _ = run_dict(spark, json_job(src, [], gates=["max(id) < count(*) - 1"]), lake)
    assert failing.status == "FAILED"
    assert "gate `max(id) < count(*) - 1` failed: observed max(id) = 3, count(*) - 1 = 3" in failing.dags[0].message


@pytest.mark.parametrize(
    ("gates", "match"),
    [
        pytest.param(["id > 0"], "a gate is an aggregate", id="not-an-aggregate"),
        pytest.param(["count(*)"], "of type bigint, not boolean", id="not-boolean"),
        pytest.param(["max(nope) > 0"], "nope", id="unknown-column"),
    ],
)
def test_gate_mistakes_are_config_errors_naming_the_gate(spark: Any, lake: Path, gates: list[str], match: str) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    with pytest.raises(ConfigError, match=match) as caught:
        run_dict(spark, json_job(src, [], gates=["count(*) > 0", *gates]), lake)
    assert caught.value.key == "job.gates[1]"


def test_a_copy_dag_has_no_gates(lake: Path) -> None:
    raw = {"copy": {"source": str(lake / "src"), "target": "copied"}, "gates": ["count(*) > 0"]}
    with pytest.raises(ConfigError, match="a copy DAG has no `gates`"):
        compile_dict(raw, lake)


def test_a_case_gate_is_judged_whole(spark: Any, lake: Path) -> None:
    """A comparison inside a CASE is not the gate's own: the gate is judged as written."""
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(3)])
    gate = "CASE WHEN count(*) > 5 THEN true ELSE false END"
    result, _ = run_dict(spark, json_job(src, [], gates=[gate]), lake)
    assert result.status == "FAILED"
    assert f"gate `{gate}` failed: observed false" in result.dags[0].message


def test_gates_do_not_evaluate_the_values_of_rejected_records(spark: Any, lake: Path) -> None:
    """Under ANSI SQL ``10 / q`` fails on the ``q = 0`` a rule rejected: a gate never sees it."""
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1, "q": 0}, {"id": 2, "q": 2}])
    steps = [{"type": "check", "expr": "q != 0"}]
    result, _ = run_dict(spark, json_job(src, steps, gates=["sum(10 / q) = 5"]), lake)
    assert result.status == "SUCCEEDED", result.dags[0].message
    assert delta_ids(lake / "out") == [2]


@pytest.mark.parametrize("groups", [1, 2])
def test_a_dataset_that_read_no_record_is_judged_however_it_is_packed(spark: Any, lake: Path, groups: int) -> None:
    root = lake.parent / "land"
    touch(root / "d0" / "part.json", [{"id": 1}], mtime=T0)
    touch(root / "d1" / "part.json", [], mtime=T0 + 1)  # a file, and no record in it
    spec = {**job(root, policy="partial", gates=["count(*) > 0"]), "work_units": {"max_groups": groups}}
    store = InMemoryMetadataStore()
    result = run_with(spark, spec, lake, store, run=1)
    statuses = sorted((d.unit.dataset.rsplit("/", 1)[1], d.status) for d in result.dags[0].datasets)
    assert statuses == [("d0", "COMMITTED"), ("d1", "FAILED")]
    assert {d.rsplit("/", 1)[1] for d in store.load_state("t", "t")} == {"d0"}


def test_validate_checks_the_gates_of_a_dag_whose_schema_is_inferred(spark: Any, lake: Path) -> None:
    from engine.runtime import JobManager

    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    spec = compile_dict(json_job(src, [], gates=["count(* > 0"]), lake)
    with pytest.raises(ConfigError) as caught:
        JobManager(spark).validate(spec, "v-1")
    assert caught.value.key == "job.gates[0]"


@pytest.mark.parametrize("written", ["0.00001%", "12.3456789%", ".5%"])
def test_a_dag_s_share_survives_compiling_as_written(lake: Path, written: str) -> None:
    spec = compile_dict(json_job(lake / "in.json", [], max_rejected=written), lake)
    (dag,) = spec.dags
    assert dag.max_rejected is not None and float(str(dag.max_rejected).rstrip("%")) == float(written.rstrip("%"))
