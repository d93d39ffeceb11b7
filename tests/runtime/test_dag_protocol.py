"""The one DAG protocol: a spec's kind picks its DAG class, every DAG reports the same summary
keys, and a plan's data travels in the plan value. No JVM."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.runtime.copydag import CopyDag
from engine.runtime.copyplan import CopyPlan
from engine.runtime.copypublish import CopyResult
from engine.runtime.dag import DAG_CLASSES, Dag, DagResult, dag_for
from engine.runtime.records import RecordsDag, RecordsResult
from engine.sources.workunits import WorkUnit
from engine.state.status import Status
from engine.state.store import LIVE
from tests.helpers import compile_dict

RECORDS = {
    "sources": {"in": {"type": "files", "format": "json", "path": "in/*.json"}},
    "sinks": {"out": {"type": "delta", "path": "out"}},
}


def _dag(raw: dict[str, Any], tmp_path: Path) -> Any:
    spec = compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "j.conf")
    return dag_for(spec.dags[0], job=spec.name, run_id="r1")


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        pytest.param(RECORDS, RecordsDag, id="records"),
        pytest.param({"copy": {"source": "a", "target": "b"}}, CopyDag, id="copy"),
    ],
)
def test_a_specs_kind_picks_its_dag_class(raw: dict[str, Any], cls: type, tmp_path: Path) -> None:
    dag = _dag(raw, tmp_path)
    assert type(dag) is cls and isinstance(dag, Dag)
    assert (dag.name, dag.job, dag.run_id) == ("t", "t", "r1")
    assert dag.spec.kind in DAG_CLASSES


def test_a_copy_dag_has_the_live_scope_and_no_limits_of_its_own(tmp_path: Path) -> None:
    copy = _dag({"copy": {"source": "a", "target": "b"}}, tmp_path)
    records = _dag(RECORDS, tmp_path)
    assert (copy.scope, copy.limits) == (LIVE, None)
    assert records.limits is not None, "a records DAG throttles by its source's limits"


def test_every_result_reports_the_same_summary_keys() -> None:
    base = DagResult(name="a", status="FAILED", message="boom").as_dict()
    records = RecordsResult(name="a", status="SUCCEEDED", records_read=3, records_rejected=1).as_dict()
    copy = CopyResult(name="a", status="SUCCEEDED", files_published=4, sinks={"target": 4}).as_dict()
    assert set(base) == set(records) == set(copy) - {"copy"}
    assert (base["records_read"], records["records_read"], records["records_rejected"]) == (0, 3, 1)
    assert copy["records_read"] == 4, "a copy DAG's published files are its summary's records_read"
    assert copy["sinks"] == {"target": 4} and copy["copy"]["files_copied"] == 0


def test_a_copy_dags_new_manifests_travel_in_its_result_not_on_the_dag(tmp_path: Path) -> None:
    dag = _dag({"copy": {"source": "a", "target": "b"}}, tmp_path)
    result = CopyResult(name="t", status="SUCCEEDED", marks={"t": '{"kind": "manifest"}'})
    assert dag.high_marks(result) == {"t": '{"kind": "manifest"}'}
    assert dag.high_marks(CopyResult(name="t", status="SUCCEEDED")) == {}
    assert not hasattr(dag, "listings") and not hasattr(dag, "_marks")


def test_a_copy_plan_carries_its_listings() -> None:
    plan = CopyPlan(units=[WorkUnit(dataset="d", low=None, high=None)])
    assert (plan.listings, plan.previous) == ({}, {})


@pytest.mark.parametrize("raw", [RECORDS, {"copy": {"source": "a", "target": "b"}}], ids=["records", "copy"])
def test_a_cancelled_result_names_the_reason_it_is_given(raw: dict[str, Any], tmp_path: Path) -> None:
    dag = _dag(raw, tmp_path)
    unit = WorkUnit(dataset="d", low=None, high=None)
    result = dag.cancelled([unit], time.monotonic(), "SIGTERM")
    assert result.status == "CANCELLED" and result.message.startswith("cancelled: SIGTERM; nothing was published")
    assert [o.status for o in result.datasets] == [Status.CANCELLED]
    assert result.staged == [] and result.processed == 0 and result.sinks == {}
