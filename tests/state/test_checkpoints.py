"""Operating checkpoints (show, set, reset, rewind) against the in-memory metadata store. No Spark."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from engine.errors import ConfigError
from engine.state.checkpoints import CheckpointRequest, change_checkpoint, rereads
from engine.state.store import LIVE, DatasetState, InMemoryMetadataStore, backfill_scope, utcnow
from engine.state.watermarks import FileWatermark, LongWatermark, MultiLongWatermark, Watermark

JOB = "orders"
DS = "urn:files:in/orders"
PAST = utcnow() - timedelta(hours=1)
"""Seeded rows are older than any change made by the test (the newest row wins)."""


def seeded(*rows: tuple[str, str, Watermark | None], scope: str = LIVE, job: str = JOB) -> InMemoryMetadataStore:
    """A store holding ``(dag, dataset, watermark)`` rows committed in the past."""
    store = InMemoryMetadataStore()
    store.save_state([DatasetState(job, dag, scope, dataset, wm, "r0", PAST, note="run") for dag, dataset, wm in rows])
    return store


def request(
    action: str,
    value: str | None = None,
    *,
    dataset: str | None = DS,
    kind: str | None = None,
    reason: str | None = "replay the late files",
    dag: str | None = None,
) -> CheckpointRequest:
    return CheckpointRequest(action=action, dataset=dataset, value=value, kind=kind, reason=reason, dag=dag)


def ours(dag: str, urn: str) -> bool:
    """The DAG's source reads ``DS`` (a dataset it may be set on before any run read it)."""
    return urn == DS


def refused(store: InMemoryMetadataStore, dags: list[str], req: CheckpointRequest) -> ConfigError:
    """The error ``req`` is refused with; nothing was written."""
    states, changes = list(store.states), list(store.changelog)
    with pytest.raises(ConfigError) as info:
        change_checkpoint(store, JOB, dags, req, run_id="r1", names_dataset=ours)
    assert store.states == states
    assert store.changelog == changes
    return info.value


def live(store: InMemoryMetadataStore, dag: str = "a") -> Watermark | None:
    return store.load_state(JOB, dag, LIVE)[DS].watermark


def test_show_changes_nothing_and_returns_none() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    before = list(store.states)
    assert change_checkpoint(store, JOB, ["a"], CheckpointRequest(action="show"), run_id="r1") is None
    assert change_checkpoint(store, JOB, ["a", "b"], request("show", "1"), run_id="r1") is None
    assert store.states == before
    assert store.changelog == []


def test_an_unknown_action_is_refused() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    error = refused(store, ["a"], request("advance", "6"))
    assert error.key == "checkpoint.action"
    for action in ("show", "set", "reset", "rewind"):
        assert action in error.message


def test_a_change_needs_a_dataset() -> None:
    error = refused(seeded(), ["a"], request("set", "1", dataset=None, kind="long"))
    assert error.key == "checkpoint.dataset"


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_a_change_needs_a_reason(reason: str | None) -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    for action in ("set", "reset", "rewind"):
        error = refused(store, ["a"], request(action, "1", reason=reason))
        assert error.key == "checkpoint.reason"


def test_set_records_the_change_and_a_new_state_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    store = seeded(("a", DS, LongWatermark(5)))
    started = utcnow()
    change = change_checkpoint(store, JOB, ["a"], request("set", "42", reason="  skip bad batch  "), run_id="r1")
    assert change is not None
    assert (change.job, change.dag, change.dataset, change.action) == (JOB, "a", DS, "set")
    assert json.loads(change.old or "") == {"kind": "long", "value": 5}
    assert json.loads(change.new or "") == {"kind": "long", "value": 42}
    assert change.reason == "skip bad batch"
    assert change.user == "alice"
    assert change.changed_at >= started
    assert store.changes(JOB) == [change]
    state = store.load_state(JOB, "a", LIVE)[DS]
    assert (state.watermark, state.run_id, state.note, state.committed_at) == (
        LongWatermark(42),
        "r1",
        "set",
        change.changed_at,
    )
    assert len(store.states) == 2, "the old row is kept as history"


def test_the_user_is_unknown_when_the_login_name_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_login() -> str:
        raise KeyError("uid not found")

    monkeypatch.setattr("getpass.getuser", no_login)
    change = change_checkpoint(seeded(("a", DS, LongWatermark(5))), JOB, ["a"], request("set", "6"), run_id="r1")
    assert change is not None
    assert change.user == "unknown"


def test_set_needs_a_value() -> None:
    error = refused(seeded(("a", DS, LongWatermark(5))), ["a"], request("set", None))
    assert error.key == "checkpoint.value"


def test_set_refuses_a_value_that_does_not_parse_as_the_kind() -> None:
    error = refused(seeded(("a", DS, LongWatermark(5))), ["a"], request("set", "2026-11-01"))
    assert error.key == "checkpoint.value"


def test_set_without_a_watermark_needs_the_kind() -> None:
    store = seeded()
    error = refused(store, ["a"], request("set", "7"))
    assert error.key == "checkpoint.kind"
    change = change_checkpoint(store, JOB, ["a"], request("set", "7", kind="long"), run_id="r1", names_dataset=ours)
    assert change is not None
    assert change.old is None
    assert live(store) == LongWatermark(7)


@pytest.mark.parametrize("action", ["reset", "rewind", "set"])
def test_a_dataset_the_job_does_not_have_is_refused_listing_its_own(action: str) -> None:
    """A reset of a misspelt dataset answered CHANGED and stored a row for it (issue 58, item 8)."""
    store = seeded(("a", DS, LongWatermark(5)))
    error = refused(store, ["a"], request(action, "3", dataset="kafka:ordrs", kind="long"))
    assert error.key == "checkpoint.dataset"
    assert f"DAG `a` of job `orders` has no dataset `kafka:ordrs`; its datasets: {DS}" in str(error), str(error)


def test_only_a_set_may_name_a_dataset_the_source_reads_before_any_run() -> None:
    error = refused(seeded(), ["a"], request("reset"))
    assert error.key == "checkpoint.dataset" and "its datasets: none yet" in str(error)


def test_set_takes_the_kind_of_the_existing_watermark() -> None:
    store = seeded(("a", DS, MultiLongWatermark((1, 2))))
    change_checkpoint(store, JOB, ["a"], request("set", "3,4"), run_id="r1")
    assert live(store) == MultiLongWatermark((3, 4))


def test_set_may_move_a_watermark_forward_or_back() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    change_checkpoint(store, JOB, ["a"], request("set", "9"), run_id="r1")
    assert live(store) == LongWatermark(9)
    change_checkpoint(store, JOB, ["a"], request("set", "1"), run_id="r2")
    assert live(store) == LongWatermark(1)
    assert [json.loads(c.new or "")["value"] for c in store.changes(JOB)] == [1, 9]


def test_a_kind_other_than_the_existing_watermark_is_refused() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    error = refused(store, ["a"], request("set", "2026-11-01 10:00:00", kind="timestamp"))
    assert error.key == "checkpoint.kind"
    assert "long" in error.message and "timestamp" in error.message
    assert refused(store, ["a"], request("rewind", "1,2", kind="multi_long")).key == "checkpoint.kind"


def test_rewind_refuses_a_later_value() -> None:
    error = refused(seeded(("a", DS, LongWatermark(5))), ["a"], request("rewind", "6"))
    assert error.key == "checkpoint.value"
    assert "use `set`" in error.message


def test_rewind_to_an_earlier_value_works() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    change = change_checkpoint(store, JOB, ["a"], request("rewind", "2"), run_id="r1")
    assert change is not None
    assert change.action == "rewind"
    assert live(store) == LongWatermark(2)


def test_rewind_of_a_file_watermark_orders_by_mtime_then_path() -> None:
    store = seeded(("a", DS, FileWatermark(1000, "in/b.json", recent=("in/a.json",))))
    assert refused(store, ["a"], request("rewind", "1000|in/c.json")).key == "checkpoint.value"
    assert refused(store, ["a"], request("rewind", "1001|in/a.json")).key == "checkpoint.value"
    change_checkpoint(store, JOB, ["a"], request("rewind", "1000|in/a.json"), run_id="r1")
    # the paths an upgraded watermark knew were read stay: the file log never had them
    assert live(store) == FileWatermark(1000, "in/a.json", recent=("in/a.json",))


def test_rewind_of_a_multi_long_must_move_no_partition_forward() -> None:
    store = seeded(("a", DS, MultiLongWatermark((10, 10))))
    assert refused(store, ["a"], request("rewind", "5,11")).key == "checkpoint.value"
    assert refused(store, ["a"], request("rewind", "5,5,5")).key == "checkpoint.value"
    change_checkpoint(store, JOB, ["a"], request("rewind", "[5, 10]"), run_id="r1")
    assert live(store) == MultiLongWatermark((5, 10))


def test_rewind_without_a_watermark_is_refused() -> None:
    error = refused(seeded(), ["a"], request("rewind", "1", kind="long"))
    assert error.key == "checkpoint.dataset"


def test_reset_clears_the_watermark_and_needs_no_value() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    change = change_checkpoint(store, JOB, ["a"], request("reset"), run_id="r1")
    assert change is not None
    assert (change.action, change.new) == ("reset", None)
    assert json.loads(change.old or "") == {"kind": "long", "value": 5}
    state = store.load_state(JOB, "a", LIVE)[DS]
    assert (state.watermark, state.note) == (None, "reset")
    # after a reset the dataset has no watermark: a later `set` needs the kind again
    assert refused(store, ["a"], request("set", "3")).key == "checkpoint.kind"


def test_a_change_touches_only_the_live_scope() -> None:
    scope = backfill_scope("2026-10-01", "2026-10-31")
    store = seeded(("a", DS, LongWatermark(5)))
    store.save_state([DatasetState(JOB, "a", scope, DS, LongWatermark(99), "bf", PAST)])
    change_checkpoint(store, JOB, ["a"], request("set", "6"), run_id="r1")
    assert live(store) == LongWatermark(6)
    assert store.load_state(JOB, "a", scope)[DS].watermark == LongWatermark(99)


def test_a_multi_dag_job_needs_the_dag_when_several_own_the_dataset() -> None:
    store = seeded(("a", DS, LongWatermark(5)), ("b", DS, LongWatermark(8)))
    error = refused(store, ["a", "b"], request("set", "6"))
    assert error.key == "checkpoint.dag"
    change = change_checkpoint(store, JOB, ["a", "b"], request("set", "6", dag="b"), run_id="r1")
    assert change is not None
    assert change.dag == "b"
    assert (live(store, "a"), live(store, "b")) == (LongWatermark(5), LongWatermark(6))


def test_a_multi_dag_job_needs_the_dag_when_none_owns_the_dataset() -> None:
    error = refused(seeded(), ["a", "b"], request("set", "6", kind="long"))
    assert error.key == "checkpoint.dag"


def test_a_multi_dag_job_infers_the_only_dag_with_the_dataset_in_live_state() -> None:
    store = seeded(("b", DS, LongWatermark(8)), ("a", "urn:other", LongWatermark(1)))
    # a backfill row in `a` and another job's row do not make the owner ambiguous
    store.save_state([DatasetState(JOB, "a", backfill_scope("x", "y"), DS, LongWatermark(2), "bf", PAST)])
    store.save_state([DatasetState("other-job", "a", LIVE, DS, LongWatermark(3), "o", PAST)])
    change = change_checkpoint(store, JOB, ["a", "b"], request("rewind", "4"), run_id="r1")
    assert change is not None
    assert change.dag == "b"
    assert live(store, "b") == LongWatermark(4)


def test_a_single_dag_job_uses_its_dag() -> None:
    store = seeded()
    change = change_checkpoint(store, JOB, ["only"], request("set", "1", kind="long"), run_id="r1", names_dataset=ours)
    assert change is not None
    assert change.dag == "only"


def test_an_unknown_dag_is_refused() -> None:
    store = seeded(("a", DS, LongWatermark(5)))
    error = refused(store, ["a", "b"], request("set", "6", dag="c"))
    assert error.key == "checkpoint.dag"


def test_the_inferred_dag_is_one_of_the_jobs_dags() -> None:
    # `gone` was removed from the job; its state rows remain. An explicit dag="gone" is refused,
    # so inferring it must not write a state row for a DAG the job does not have.
    store = seeded(("gone", DS, LongWatermark(5)), ("b", DS, LongWatermark(8)))
    change = change_checkpoint(store, JOB, ["a", "b"], request("set", "6"), run_id="r1")
    assert change is not None
    assert change.dag == "b"


def test_a_dataset_owned_only_by_a_dag_outside_the_job_is_refused() -> None:
    store = seeded(("gone", DS, LongWatermark(5)))
    error = refused(store, ["a", "b"], request("set", "6"))
    assert error.key == "checkpoint.dag"


def test_an_unknown_kind_is_refused_naming_the_kind_key() -> None:
    error = refused(seeded(), ["a"], request("set", "1", kind="offset"))
    assert error.key == "checkpoint.kind"


@pytest.mark.parametrize(
    ("old", "action", "value", "again"),
    [
        pytest.param(LongWatermark(5), "reset", None, True, id="reset-forgets-a-watermark"),
        pytest.param(None, "reset", None, False, id="reset-of-a-dataset-never-read"),
        pytest.param(LongWatermark(5), "rewind", "2", True, id="rewind-back"),
        pytest.param(LongWatermark(5), "rewind", "5", False, id="rewind-to-where-it-is"),
        pytest.param(LongWatermark(5), "set", "9", False, id="set-forward-skips"),
        pytest.param(LongWatermark(5), "set", "1", True, id="set-back"),
        pytest.param(MultiLongWatermark((10, 10)), "rewind", "10,4", True, id="one-partition-back"),
        pytest.param(FileWatermark(1000, "in/b.json"), "rewind", "1000|in/b.json", False, id="file-same-position"),
        pytest.param(FileWatermark(1000, "in/b.json"), "rewind", "1000|in/a.json", True, id="file-earlier-path"),
    ],
)
def test_rereads_says_whether_the_next_run_reads_a_range_again(
    old: Watermark | None, action: str, value: str | None, again: bool
) -> None:
    store = seeded(("a", DS, old))
    change = change_checkpoint(
        store, JOB, ["a"], request(action, value, kind="long" if old is None else None), run_id="r1"
    )
    assert change is not None
    assert rereads(change) is again
