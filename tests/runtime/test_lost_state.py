"""Telling lost state from a first run, against the in-memory metadata store. No Spark."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.commit.log import ABANDONED, DONE, SEQUENCE
from engine.commit.steps import SetWatermarks
from engine.runtime.lost_state import lost_scopes, lost_state
from engine.state.checkpoints import start_over
from engine.state.status import Status
from engine.state.store import (
    LIVE,
    DatasetState,
    FileRead,
    InMemoryMetadataStore,
    JobStatusRow,
    LogRow,
    backfill_scope,
    utcnow,
)
from engine.state.watermarks import LongWatermark

JOB, DAG, DS = "j", "d", "urn:a"
MARK = LongWatermark(7).to_json()


def batch(number: int, closing: str = DONE, scope: str = LIVE) -> list[LogRow]:
    """A batch of ``DAG`` whose sequence set ``DS``'s watermark, closed by ``closing``."""
    step = SetWatermarks(JOB, DAG, scope, "r1", {DS: MARK}).to_json()
    body = json.dumps({"datasets": [DS], "steps": [step]})
    now = utcnow()
    return [
        LogRow(JOB, DAG, scope, number, SEQUENCE, "r1", now, body),
        LogRow(JOB, DAG, scope, number, closing, "r1", now),
    ]


def file_log(store: InMemoryMetadataStore, scope: str = LIVE) -> None:
    store.log_files([FileRead(JOB, DAG, scope, DS, "/land/a.json", 1, 10, 1, "r1", utcnow())])


def job_status(store: InMemoryMetadataStore, scope: str = LIVE) -> None:
    now = utcnow()
    row = JobStatusRow("r1", JOB, DAG, scope, DS, Status.COMMITTED, "", 3, 10, 0.1, None, "7", now, now)
    store.add_job_status([row])


@pytest.mark.parametrize(
    ("evidence", "says"),
    [
        pytest.param(
            lambda s: s.append_log(batch(1)), "commit log _engine/commit_log shows 1 published", id="commit-log"
        ),
        pytest.param(file_log, "file log _engine/files_read lists 1 file(s) read by 1 batch(es)", id="file-log"),
        pytest.param(job_status, "run r1 left dataset urn:a at watermark 7", id="job-status"),
    ],
)
def test_each_kind_of_evidence_alone_shows_lost_state(evidence, says: str) -> None:  # type: ignore[no-untyped-def]
    store = InMemoryMetadataStore()
    evidence(store)

    lost = lost_state(store, store.read_log(JOB), job=JOB, dag=DAG, scope=LIVE)

    assert lost is not None and lost.datasets == [DS]
    assert any(says in e for e in lost.evidence), lost.evidence


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(lambda s: None, id="first-run"),
        pytest.param(lambda s: s.append_log(batch(1, closing=ABANDONED)), id="abandoned-batch"),
        pytest.param(lambda s: (s.append_log(batch(1)[:1]), file_log(s)), id="files-of-an-unfinished-batch"),
        pytest.param(
            lambda s: (s.append_log(batch(1, closing=ABANDONED)), file_log(s)), id="files-of-an-abandoned-batch"
        ),
        pytest.param(lambda s: s.append_log(batch(1, scope=backfill_scope("1", "2"))), id="other-scope"),
        pytest.param(
            lambda s: (s.append_log(batch(1)), s.save_state([DatasetState(JOB, DAG, LIVE, DS, None, "c", utcnow())])),
            id="reset-row-kept",
        ),
    ],
)
def test_no_evidence_or_some_state_is_not_lost_state(setup) -> None:  # type: ignore[no-untyped-def]
    store = InMemoryMetadataStore()
    setup(store)

    assert lost_state(store, store.read_log(JOB), job=JOB, dag=DAG, scope=LIVE) is None


def test_start_over_gives_every_lost_scope_state_again() -> None:
    store = InMemoryMetadataStore()
    backfill = backfill_scope("1", "2")
    store.append_log([*batch(1), *batch(2, scope=backfill)])
    assert [x.scope for x in lost_scopes(store, JOB, DAG)] == sorted([LIVE, backfill])

    change = start_over(
        store, JOB, DAG, {x.scope: x.datasets for x in lost_scopes(store, JOB, DAG)}, reason="ok", run_id="c"
    )

    assert lost_scopes(store, JOB, DAG) == []
    assert {(s.scope, s.dataset, s.watermark, s.note) for s in store.states} == {
        (LIVE, DS, None, "start_over"),
        (backfill, DS, None, "start_over"),
    }
    assert (change.action, change.reason, store.changelog) == ("start_over", "ok", [change])


def test_the_state_read_for_the_check_is_read_again_once_recovery_sets_watermarks(spark: Any) -> None:
    """The check reads a DAG's state before recovery; planning must see what recovery published,
    or it would read the recovered batch's range again."""
    from types import SimpleNamespace

    from engine.runtime.metadata import MetadataManager
    from engine.sources.workunits import Budget

    store = InMemoryMetadataStore()
    store.save_state([DatasetState(JOB, DAG, LIVE, DS, LongWatermark(3), "r0", utcnow())])
    store.append_log(batch(1)[:1])  # its sequence stored, never done: the next run replays it
    limits = SimpleNamespace(budget=Budget, per_dataset=SimpleNamespace(budget=Budget))
    dag: Any = SimpleNamespace(
        name=DAG, scope=LIVE, limits=limits, spec=SimpleNamespace(publish=SimpleNamespace(max_attempts=3))
    )
    manager = MetadataManager(store, spark=spark, job=JOB, run_id="r2")

    manager.check_state([dag])
    assert manager.recover(dag) is None

    assert manager.context(dag).state[DS].watermark == LongWatermark(7)
