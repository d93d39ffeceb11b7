"""Where a flow stored through the service may read and write (issue 58, item 9), against a real
``serve.sh``: only inside the warehouse and the roots the deployment's topology allows
(``conf/topology/demo_roots.conf`` lets the demo's landing hop read ``jobs/demo/data`` and
``jobs/demo/schemas``). A refusal is a 422 naming the body's key, and nothing is stored; a flow
stored before the limit is refused when it is run, and no execution starts."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.e2e import REPO
from tests.service.conftest import Served
from tests.service.test_api import FLOW, flow, stored_rows


def refused(served: Served, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body``: the 422's JSON, after checking nothing of the flow was stored."""
    answer = served.call("POST", "/flowconfigs", "carol", json=body)
    assert answer.status_code == 422, answer.text
    group, name = body["flowGroup"], body["flowName"]
    assert stored_rows(served, group, name) == []
    assert served.call("GET", f"/flowconfigs/{group}/{name}", "carol").status_code == 404
    return answer.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("properties", "key", "said"),
    [
        pytest.param({"source.path": "/etc"}, "properties.source.path", "/etc/orders.json", id="read-etc"),
        pytest.param(
            {"destination": {"path": "/tmp/engine-58-outside"}},
            "properties.destination.path",
            "/tmp/engine-58-outside/orders",
            id="write-outside",
        ),
        pytest.param(
            {"destination.path": "../../../../../../tmp/engine-58-climb"},
            "properties.destination.path",
            "/tmp/engine-58-climb/orders",
            id="relative-climb",
        ),
        pytest.param({"source.schemas": "/root"}, "properties.source.schemas", "/root/orders.avsc", id="schema-probe"),
        pytest.param(
            {"destination.path": str(REPO / "jobs" / "demo" / "data" / "out")},
            "properties.destination.path",
            "may only read",
            id="write-into-a-read-only-root",
        ),
        pytest.param(
            {"source.path": "{wh}/_engine/service"}, "properties.source.path", "_engine", id="read-the-service-store"
        ),
    ],
)
def test_a_path_outside_the_allowed_roots_is_refused_naming_its_key(
    served: Served, properties: dict[str, Any], key: str, said: str
) -> None:
    text = json.dumps(properties).replace("{wh}", str(served.warehouse))
    name = f"p{abs(hash(text)) % 10**8}"
    found = refused(served, flow("confined", name, properties=json.loads(text)))
    assert found["key"] == key, found
    assert said in found["detail"], found
    assert "cannot read Avro schema" not in found["detail"], "nothing outside the roots is read, even to compile"


@pytest.mark.parametrize(
    "dataset",
    [
        pytest.param("../../../../tmp/engine-58", id="parent"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("a/b", id="slash"),
        pytest.param(".hidden", id="dot"),
        pytest.param("x" * 49, id="too-long"),
    ],
)
def test_a_dataset_name_cannot_climb_out(served: Served, dataset: str) -> None:
    found = refused(served, flow("confined", "ds", datasets=["orders", dataset]))
    assert found["key"] == "datasets[1]", found


def test_a_symbolic_link_out_of_the_warehouse_is_refused(served: Served, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = served.warehouse / "engine58_link"
    if not link.is_symlink():
        link.symlink_to(outside)
    found = refused(served, flow("confined", "linked", properties={"destination.path": "engine58_link"}))
    assert found["key"] == "properties.destination.path", found
    assert "symbolic link" in found["detail"] and str(outside) in found["detail"], found
    assert list(outside.iterdir()) == []


def test_a_path_inside_the_warehouse_is_allowed(served: Served) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow("confined", "inside", properties={"x": 1}))
    assert made.status_code == 201, made.text
    inside = str(served.warehouse / "teams" / "sales")  # (a copy's relative target is the flow file's folder's)
    other = flow("confined", "inside_sub", properties={"destination.path": inside})
    assert served.call("POST", "/flowconfigs", "carol", json=other).status_code == 201


def _store_directly(served: Served, group: str, name: str, config: dict[str, Any]) -> None:
    """A version written as a service from before the limit stored it (its own table, delta-rs)."""
    now = datetime.now(timezone.utc)
    row = {
        "flow_group": group,
        "flow_name": name,
        "version": 1,
        "action": "create",
        "config": json.dumps(config),
        "changed_by": "carol",
        "changed_at": now,
    }
    schema = pa.schema(
        [(k, pa.int64() if k == "version" else pa.string()) for k in list(row)[:-1]]
        + [("changed_at", pa.timestamp("us", tz="UTC"))]
    )
    write_deltalake(
        os.path.join(served.warehouse, "_engine", "service", "flowconfigs"),
        pa.Table.from_pylist([row], schema=schema),
        mode="append",
    )


def test_a_flow_stored_before_the_limit_is_refused_when_run_and_no_execution_starts(served: Served) -> None:
    _store_directly(served, "legacy", "etc", {**FLOW, "owner": "carol", "properties": {"source.path": "/etc"}})
    deadline = time.monotonic() + 10  # the service sees another writer's change within half a second
    while served.call("GET", "/flowconfigs/legacy/etc", "carol").status_code != 200:
        assert time.monotonic() < deadline, "the service never saw the stored version"
        time.sleep(0.2)
    run = served.call("POST", "/flowexecutions", "carol", json={"flowGroup": "legacy", "flowName": "etc"})
    assert run.status_code == 422, run.text
    assert run.json()["key"] == "properties.source.path" and "/etc/orders.json" in run.json()["detail"]
    assert served.call("GET", "/flowstatuses/legacy/etc", "carol").json() == []
    assert list((served.warehouse / "_engine" / "service" / "runs").glob("*/flows/legacy")) == []
    specs = served.call("GET", "/flowconfigs/legacy/etc/jobspecs", "carol")
    assert specs.status_code == 422 and specs.json()["key"] == "properties.source.path", specs.text
