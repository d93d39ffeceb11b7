"""The service's store without HTTP: two stores on one warehouse stand for two service instances.
What they wrote is read back with delta-rs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from engine.service.errors import Conflict, NotFound, Unavailable
from engine.service.flowstore import FlowStore
from engine.service.tables import FRESH_SECONDS, ServiceTable
from engine.service.users import Users
from engine.state.delta_create import VERSION_PROPERTY


def stores(tmp_path: Path, n: int = 2) -> list[FlowStore]:
    root = str(tmp_path / "_engine" / "service")
    return [FlowStore(root, tmp_path / "no-flow-files") for _ in range(n)]


def race(actions: list[object]) -> list[object]:
    """Run the callables at once; what each returned or raised."""
    results: list[object] = [None] * len(actions)
    gate = threading.Barrier(len(actions))

    def run(i: int) -> None:
        gate.wait()
        try:
            results[i] = actions[i]()  # type: ignore[operator]
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_of_two_instances_creating_one_flow_exactly_one_succeeds(tmp_path: Path) -> None:
    a, b = stores(tmp_path)
    results = race(
        [
            lambda s=s, i=i: s.save("g", "f", {"description": str(i)}, by=f"u{i}", action="create")
            for i, s in enumerate([a, b, a, b])
        ]
    )
    made = [r for r in results if not isinstance(r, Exception)]
    assert len(made) == 1 and all(isinstance(r, Conflict) for r in results if r not in made)
    rows = DeltaTable(str(tmp_path / "_engine" / "service" / "flowconfigs")).to_pyarrow_table().to_pylist()
    assert [(r["flow_name"], r["version"], r["action"]) for r in rows] == [("f", 1, "create")]


def test_changes_made_at_once_by_two_instances_each_get_their_own_version(tmp_path: Path) -> None:
    a, b = stores(tmp_path)
    a.save("g", "f", {"description": "0"}, by="u", action="create")
    results = race(
        [
            lambda s=s, i=i: s.save("g", "f", {"description": str(i)}, by="u", action="update")
            for i, s in enumerate([a, b] * 3)
        ]
    )
    assert not [r for r in results if isinstance(r, Exception)]
    versions = sorted(f.version for f in b.history("g", "f"))
    assert versions == [1, 2, 3, 4, 5, 6, 7]
    newest = a.get("g", "f")
    assert newest is not None and newest.version == 7


def test_a_deleted_flow_is_gone_until_created_again_and_its_history_stays(tmp_path: Path) -> None:
    (store,) = stores(tmp_path, 1)
    store.save("g", "f", {"description": "a"}, by="u", action="create")
    store.save("g", "f", None, by="u", action="delete")
    assert store.get("g", "f") is None and store.listed() == []
    with pytest.raises(NotFound):
        store.save("g", "f", {}, by="u", action="update")
    store.save("g", "f", {"description": "b"}, by="v", action="create")
    assert [(h.version, h.action, h.changed_by) for h in store.history("g", "f")] == [
        (1, "create", "u"),
        (2, "delete", "u"),
        (3, "create", "v"),
    ]


def test_users_tokens_replaced_and_removed(tmp_path: Path) -> None:
    root = str(tmp_path / "_engine" / "service")
    users, other = Users.under(root), Users.under(root)  # two instances
    first = users.add("ann", ["g1"])
    assert other.authenticate(first) is not None and other.authenticate(first).groups == ("g1",)  # type: ignore[union-attr]
    second = users.add("ann", ["g1", "g2"], admin=True)
    time.sleep(FRESH_SECONDS + 0.1)  # another instance's change shows within this
    assert other.authenticate(first) is None
    found = other.authenticate(second)
    assert found is not None and found.admin and found.principals == {"ann", "group:g1", "group:g2"}
    assert users.remove("ann")
    time.sleep(FRESH_SECONDS + 0.1)
    assert other.authenticate(second) is None
    assert not users.remove("nobody")


def test_a_table_made_by_a_newer_engine_is_refused(tmp_path: Path) -> None:
    ServiceTable(str(tmp_path), "t", (("a", "string"),), version=3).append([{"a": "x"}])
    assert DeltaTable(str(tmp_path / "t")).metadata().configuration[VERSION_PROPERTY] == "3"
    with pytest.raises(Unavailable, match="schema version 3, written by a newer engine"):
        ServiceTable(str(tmp_path), "t", (("a", "string"),), version=1).rows()


def test_a_growing_table_is_compacted_and_keeps_every_row(tmp_path: Path) -> None:
    table = ServiceTable(str(tmp_path), "t", (("a", "string"),))
    for i in range(70):
        table.append([{"a": str(i)}])
    assert sorted(int(r["a"]) for r in table.rows()) == list(range(70))
    assert len(DeltaTable(str(tmp_path / "t")).file_uris()) < 10, "compacted"


def test_a_store_that_cannot_be_reached_answers_its_last_good_state_and_refuses_writes(tmp_path: Path) -> None:
    import shutil

    table = ServiceTable(str(tmp_path), "t", (("a", "string"),))
    table.append([{"a": "x"}])
    assert [r["a"] for r in table.rows()] == ["x"]
    log = tmp_path / "t" / "_delta_log"
    shutil.move(str(log), str(tmp_path / "moved"))
    log.write_text("not a folder")  # the store breaks under the service
    time.sleep(0.6)
    assert [r["a"] for r in table.rows()] == ["x"], "the last good state"
    with pytest.raises(Unavailable, match="cannot write the service's t table"):
        table.append([{"a": "y"}])
    with pytest.raises(Unavailable, match=r"cannot (read|reach) the service's t table"):
        ServiceTable(str(tmp_path), "t", (("a", "string"),)).rows()  # nothing good to fall back on
