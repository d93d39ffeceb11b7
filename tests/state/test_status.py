"""The one status vocabulary: its order, the merge rule, and that each overall status it now
computes (the FlowStatus row, the summary, a multirun, the exit code) answers as the string
computations it replaced did. No Spark."""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from engine.state.status import OK_STATUSES, Status, dag_outcome, multirun_outcome, run_outcome

DAG_OUTCOMES = ("SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED", "SKIPPED", "QUARANTINED")
RUN_SUMMARIES = ("SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED", "VALID", "OK", "CHANGED", "CONFIG_ERROR", "BUSY", None)


def test_values_are_the_strings_written_to_the_tables_and_the_summary() -> None:
    assert [s.value for s in Status] == [s.name for s in Status]
    assert json.dumps({"status": Status.PARTIAL}) == '{"status": "PARTIAL"}'
    assert Status.ROLLED_BACK == "ROLLED_BACK" and Status("QUARANTINED") is Status.QUARANTINED
    assert f"{Status.CANCELLED}" == str(Status.CANCELLED) == "CANCELLED"  # in messages as the strings were


def test_every_former_vocabulary_is_in_it_with_its_strings() -> None:
    dataset = {"COMMITTED", "EMPTY", "FAILED", "ROLLED_BACK", "QUARANTINED", "CANCELLED", "SKIPPED"}
    flow = {"SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED"}
    run = {"RUNNING", "SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED", "SKIPPED", "QUARANTINED"}
    cli = {"VALID", "OK", "CHANGED", "CONFIG_ERROR", "BUSY"}
    assert {s.value for s in Status} == dataset | flow | run | cli


@pytest.mark.parametrize(
    ("better", "worse"),
    [
        pytest.param(Status.SUCCEEDED, Status.PARTIAL, id="success-then-partial"),
        pytest.param(Status.PARTIAL, Status.FAILED, id="partial-then-failure"),
        pytest.param(Status.COMMITTED, Status.ROLLED_BACK, id="committed-then-rolled-back"),
        pytest.param(Status.EMPTY, Status.FAILED, id="empty-then-failed"),
        pytest.param(Status.RUNNING, Status.FAILED, id="running-then-failed"),
        pytest.param(Status.FAILED, Status.CANCELLED, id="failure-then-stop"),
        pytest.param(Status.VALID, Status.CONFIG_ERROR, id="valid-then-config-error"),
    ],
)
def test_a_status_may_be_downgraded_never_upgraded(better: Status, worse: Status) -> None:
    assert better.rank < worse.rank
    assert better.merge(worse) is worse
    assert worse.merge(better) is worse
    assert worse.merge(worse.value) is worse  # a stored string merges as its status


def test_merging_is_order_free_and_idempotent() -> None:
    for a, b, c in itertools.product(Status, repeat=3):
        assert a.merge(b) is b.merge(a)
        assert a.merge(b).merge(c) is a.merge(b.merge(c))
        assert a.merge(a) is a


def test_worst_of_nothing_is_where_it_starts() -> None:
    assert Status.worst([]) is Status.SUCCEEDED
    assert Status.worst([], start=Status.VALID) is Status.VALID
    assert Status.worst(["SUCCEEDED", Status.SKIPPED, "PARTIAL"]) is Status.SKIPPED


def test_only_the_run_level_successes_exit_zero() -> None:
    assert {s for s in Status if s.ok} == OK_STATUSES == {Status(s) for s in ("SUCCEEDED", "VALID", "OK", "CHANGED")}
    assert Status.of("nonsense") is Status.FAILED and Status.of(None) is Status.FAILED


# -- the former computations, as they were, against the one that replaced them ---------------------


def former_flow(statuses: list[str], committed: int, cancelled: bool) -> str:
    """``MetadataManager.finish`` before: the FlowStatus row's status."""
    dag_failed = any(s != "SUCCEEDED" for s in statuses)
    if cancelled:
        return "CANCELLED"
    if not dag_failed:
        return "SUCCEEDED"
    if committed or any(s in ("SUCCEEDED", "PARTIAL") for s in statuses):
        return "PARTIAL"
    return "FAILED"


def former_job_result(statuses: list[str], flow: str | None, stopped: bool) -> str:
    """``JobResult.status`` before: the summary's status."""
    if stopped:
        return "CANCELLED"
    if all(s == "SUCCEEDED" for s in statuses):
        return "SUCCEEDED"
    return "PARTIAL" if flow == "PARTIAL" else "FAILED"


def former_multirun(statuses: list[Any]) -> str:
    """``multirun_summary`` before."""
    ok = ("SUCCEEDED", "VALID", "OK", "CHANGED")
    seen = set(statuses)
    return "SUCCEEDED" if seen <= set(ok) else "CANCELLED" if "CANCELLED" in seen else "FAILED"


DATASET_OUTCOMES = ("COMMITTED", "EMPTY", "FAILED", "ROLLED_BACK")


def former_records_dag(statuses: list[str], cancelled: bool) -> str:
    """``RecordsDag``'s ``result_of`` before (and ``cancelled`` setting CANCELLED over it)."""
    if cancelled:
        return "CANCELLED"
    if "FAILED" not in statuses:
        return "SUCCEEDED"
    return "PARTIAL" if "COMMITTED" in statuses else "FAILED"


def former_copy_dag(statuses: list[str], published: bool, cancelled: bool) -> str:
    """``copy_result`` before (and ``cancelled`` setting CANCELLED over it)."""
    if cancelled:
        return "CANCELLED"
    if not {"FAILED", "ROLLED_BACK"} & set(statuses):
        return "SUCCEEDED"
    return "PARTIAL" if published else "FAILED"


def dataset_combinations(most: int = 4) -> list[list[str]]:
    return [list(c) for n in range(most + 1) for c in itertools.product(DATASET_OUTCOMES, repeat=n)]


def test_a_records_dag_status_is_as_before() -> None:
    """A records DAG rolls datasets back only beside a failed one (``publish.policy=full``)."""
    for datasets in dataset_combinations():
        if "ROLLED_BACK" in datasets and "FAILED" not in datasets:
            continue
        new = dag_outcome(datasets, published="COMMITTED" in datasets)
        assert new == former_records_dag(datasets, cancelled=False), datasets


@pytest.mark.parametrize("published", [False, True])
def test_a_copy_dag_status_is_as_before(published: bool) -> None:
    for datasets in dataset_combinations():
        assert dag_outcome(datasets, published=published) == former_copy_dag(datasets, published, False), datasets


@pytest.mark.parametrize("units", [1, 3])
def test_a_stopped_dag_is_cancelled_whatever_else_it_did(units: int) -> None:
    assert dag_outcome(["CANCELLED"] * units, published=False) == former_records_dag([], cancelled=True)
    assert dag_outcome(["CANCELLED"] * units, published=True) == former_copy_dag([], True, cancelled=True)


def dag_combinations(most: int = 3) -> list[list[str]]:
    return [list(c) for n in range(most + 1) for c in itertools.product(DAG_OUTCOMES, repeat=n)]


@pytest.mark.parametrize("committed", [0, 2])
@pytest.mark.parametrize("cancelled", [False, True])
def test_the_flow_row_status_is_as_before(committed: int, cancelled: bool) -> None:
    for dags in dag_combinations():
        new = run_outcome(dags, published=committed > 0, cancelled=cancelled)
        assert new == former_flow(dags, committed, cancelled), dags


@pytest.mark.parametrize("stopped_after_finish", [False, True])
def test_the_summary_status_is_as_before(stopped_after_finish: bool) -> None:
    """``JobResult`` is built with the flow row :meth:`Publisher.finish` wrote for its DAGs; the
    run may be stopped after that row was written."""
    from engine.runtime.jobmanager import JobResult

    for dags, committed, stopped in itertools.product(dag_combinations(), (0, 2), (False, True)):
        flow = SimpleNamespace(status=Status(former_flow(dags, committed, stopped)))
        stop = SimpleNamespace(is_set=lambda s=stopped or stopped_after_finish: s, reason="")
        results: Any = [SimpleNamespace(status=s) for s in dags]
        job = JobResult("j", "r", results, 0.0, flow=flow, stopped=stop)  # type: ignore[arg-type]
        assert job.status == former_job_result(dags, flow.status.value, stopped or stopped_after_finish), dags


def test_a_summary_without_a_flow_row_is_as_before() -> None:
    from engine.runtime.jobmanager import JobResult

    for dags in dag_combinations():
        if any(s in ("SUCCEEDED", "PARTIAL") for s in dags) and not all(s == "SUCCEEDED" for s in dags):
            continue  # mixed: only the flow row (which saw the committed datasets) says PARTIAL
        job = JobResult("j", "r", [SimpleNamespace(status=s) for s in dags], 0.0)  # type: ignore[misc]
        assert job.status == former_job_result(dags, None, False), dags


def test_a_multirun_status_is_as_before() -> None:
    for n in range(4):
        for runs in itertools.product(RUN_SUMMARIES, repeat=n):
            assert multirun_outcome(runs) == former_multirun(list(runs)), runs


def test_a_multirun_summary_keeps_its_keys_and_strings() -> None:
    from engine.cli.app import multirun_summary

    runs = [{"status": "SUCCEEDED", "exit_code": 0, "dags": []}, {"status": "PARTIAL", "exit_code": 1}]
    assert json.loads(json.dumps(multirun_summary(runs))) == {
        "status": "FAILED",
        "runs": [{"status": "SUCCEEDED", "exit_code": 0}, {"status": "PARTIAL", "exit_code": 1}],
        "failed_runs": 1,
    }


def test_a_flow_row_written_by_the_publisher_carries_the_run_outcome() -> None:
    from engine.commit.log import CommitLog
    from engine.runtime.publisher import Publisher
    from engine.state.store import InMemoryMetadataStore

    store = InMemoryMetadataStore()
    publisher = Publisher(spark=None, state=store, status=store, commit_log=CommitLog(store, "j", "r1"))  # type: ignore[arg-type]
    committed = SimpleNamespace(status=Status.COMMITTED)
    results: Any = [
        SimpleNamespace(status="FAILED", datasets=[committed], message="boom", processed=3),
        SimpleNamespace(status="FAILED", datasets=[], message="", processed=0),
    ]
    row = publisher.finish(results, start=datetime(2026, 1, 1))
    assert (row.status, row.committed, row.failed, row.message, row.records) == ("PARTIAL", 1, 0, "boom", 3)
    assert store.flows == [row]
