"""The commit log's transitions (:class:`CommitLog`, the only builder of its rows) and the
operator's actions on it, against the in-memory store. No Spark."""

from __future__ import annotations

import getpass
import json

import pytest

from engine.commit import operations
from engine.commit.log import ABANDONED, ATTEMPT, DONE, PLAN, RELEASED, SEQUENCE, CommitLog
from engine.commit.sequence import CommitSequence
from engine.commit.steps import SetWatermarks
from engine.errors import ConfigError
from engine.state.store import LIVE, InMemoryMetadataStore


def sequence(batch: int = 1, dag: str = "d") -> CommitSequence:
    step = SetWatermarks("j", dag, LIVE, "r1", {"urn:a": '{"kind": "long", "value": 7}'})
    return CommitSequence("j", dag, LIVE, batch, [step], ["urn:a"])


def test_each_transition_builds_its_row_stamped_with_the_run() -> None:
    log = CommitLog(InMemoryMetadataStore(), "j", "r1")
    plan = log.plan("d", LIVE, 1, {"datasets": ["urn:a"], "units": []})
    seq = log.sequence(sequence())
    attempt = log.attempt("d", LIVE, 1, "x" * 5000)
    done = log.done("d", LIVE, 1, "recovered")
    assert [r.kind for r in (plan, seq, attempt, done)] == [PLAN, SEQUENCE, ATTEMPT, DONE]
    assert {(r.job, r.dag, r.scope, r.batch, r.run_id) for r in (plan, seq, attempt, done)} == {
        ("j", "d", LIVE, 1, "r1")
    }
    assert json.loads(plan.body) == {"datasets": ["urn:a"], "units": []}
    assert json.loads(seq.body)["datasets"] == ["urn:a"] and json.loads(seq.body)["steps"][0]["kind"]
    assert len(attempt.message) == 4000, "an error is cut to what the row keeps"
    assert (done.message, done.body) == ("recovered", "")


def test_a_written_sequence_reads_back_as_the_same_steps() -> None:
    store = InMemoryMetadataStore()
    log = CommitLog(store, "j", "r1")
    log.write(log.sequence(sequence()))
    batch = CommitLog(store, "j", "r2").dag("d").find(1)
    assert batch is not None and batch.unfinished
    assert CommitSequence.of("j", batch) == sequence()


def test_rows_written_together_are_one_append_and_join_the_run_view() -> None:
    store = InMemoryMetadataStore()
    log = CommitLog(store, "j", "r1")
    appends: list[int] = []
    store.append_log = lambda rows: appends.append(len(rows))  # type: ignore[method-assign]
    log.write(log.abandoned("d", LIVE, 1, "plan out of date"), log.plan("d", LIVE, 2, {"units": []}))
    assert appends == [2]
    assert [r.kind for r in log.rows] == [ABANDONED, PLAN]
    assert log.dag("d").next_batch() == 3


def quarantined_log(store: InMemoryMetadataStore, *dags: str) -> CommitLog:
    log = CommitLog(store, "j", "r1")
    for dag in dags:
        log.write(log.sequence(sequence(dag=dag)), log.attempt(dag, LIVE, 1, "boom"))
    return log


def test_release_resets_the_failed_attempts_and_says_who() -> None:
    store = InMemoryMetadataStore()
    log = quarantined_log(store, "d")
    target = operations.target(log, {"d": 1}, dag=None, batch=None)
    assert (target.dag, target.batch, target.state, target.attempts) == ("d", 1, "quarantined", 1)
    operations.release(CommitLog(store, "j", "commit-r2"), target, "fixed the disk")
    (row,) = [r for r in store.read_log("j") if r.kind == RELEASED]
    assert (row.run_id, row.message) == ("commit-r2", f"{getpass.getuser()}: fixed the disk")
    assert CommitLog(store, "j", "r3").pending({"d": 1})[0].state == "unfinished"


def test_abandon_closes_the_batch() -> None:
    store = InMemoryMetadataStore()
    log = quarantined_log(store, "d")
    operations.abandon(log, operations.target(log, {}, dag="d", batch=1), "not needed", state=store)
    assert store.read_log("j")[-1].kind == ABANDONED
    assert CommitLog(store, "j", "r3").pending({}) == []


@pytest.mark.parametrize(
    ("dag", "batch", "match", "key"),
    [
        pytest.param("nope", None, "no unfinished batch of job j dag nope; see mode=commit", "commit.dag", id="no-dag"),
        pytest.param("d", 9, "no unfinished batch of job j dag d numbered 9", "commit.batch", id="no-batch"),
        pytest.param(None, None, r"2 unfinished batches match \(d#1, e#1\)", "commit.dag", id="ambiguous"),
    ],
)
def test_a_request_must_name_exactly_one_unfinished_batch(
    dag: str | None, batch: int | None, match: str, key: str
) -> None:
    log = quarantined_log(InMemoryMetadataStore(), "d", "e")
    with pytest.raises(ConfigError, match=match) as caught:
        operations.target(log, {}, dag=dag, batch=batch)
    assert caught.value.key == key


@pytest.mark.spark
def test_abandon_clears_staging_without_decoding_steps_of_plugins_not_loaded(spark: object, tmp_path: object) -> None:
    """A copy DAG's sequence names step kinds its plugin registers on import; `mode=commit` does
    not import it, and abandon only needs the staging deletions."""
    import dataclasses
    from pathlib import Path

    from engine.commit.steps import DeleteStaging

    staging = Path(str(tmp_path)) / "staging"
    staging.mkdir()
    (staging / "part-0").write_text("x")
    store = InMemoryMetadataStore()
    log = CommitLog(store, "j", "r1")
    seq = CommitSequence("j", "d", LIVE, 1, [DeleteStaging([staging.as_uri()])], ["urn:a"])
    row = log.sequence(seq)
    body = json.loads(row.body)
    body["steps"].insert(0, {"kind": "a_plugin_step_not_imported", "files": ["f"] * 3})
    log.write(dataclasses.replace(row, body=json.dumps(body)), log.attempt("d", LIVE, 1, "boom"))
    pending = operations.target(log, {"d": 1}, dag="d", batch=1)
    operations.abandon(log, pending, "not needed", spark=spark, state=store)  # type: ignore[arg-type]
    assert store.read_log("j")[-1].kind == ABANDONED
    assert not staging.exists()
