"""Values the flow service takes only as their own type (issue 58, item 12), against a real
``serve.sh``: no "yes" for true, no float for a count, no key given twice, no owner changed by
leaving it out, no unchecked flow group name, no query parameter that is not a valid one. Each
refusal is a 422 naming the key, and changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.service.conftest import Served
from tests.service.test_api import FLOW, flow, stored_rows


@pytest.mark.parametrize(
    ("key", "value"),
    [
        *(pytest.param("runImmediately", v, id=f"runImmediately-{v!r}") for v in ("yes", "on", 1, "true", "false")),
        *(pytest.param("catchup", v, id=f"catchup-{v!r}") for v in ("true", 1)),
        *(pytest.param("parallelism", v, id=f"parallelism-{v!r}") for v in (1e30, 4.0, "4", 10**9, 0)),
        pytest.param("owner", None, id="owner-null"),
        pytest.param("datasets", "orders", id="datasets-a-string"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_and_starts_nothing(served: Served, key: str, value: Any) -> None:
    name = f"typed{abs(hash((key, repr(value)))) % 10**8}"
    answer = served.call("POST", "/flowconfigs", "carol", json={**flow("strict", name), key: value})
    assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text
    assert stored_rows(served, "strict", name) == []
    assert served.call("GET", f"/flowstatuses/strict/{name}", "carol").json() == [], "no execution started"


@pytest.mark.parametrize(
    ("body", "key"),
    [
        pytest.param(
            '{"flowGroup": "strict", "flowName": "dup", "flowName": "dup2", "source": "demo_landing", '
            '"destinations": ["demo_replica"], "datasets": ["orders"]}',
            "flowName",
            id="top-level",
        ),
        pytest.param(
            '{"flowGroup": "strict", "flowName": "dup2", "source": "demo_landing", "destinations": ["demo_replica"], '
            '"datasets": ["orders"], "properties": {"x": 1, "x": 2}}',
            "properties.x",
            id="nested",
        ),
        pytest.param('{"flowGroup": "strict", "flowName": "dup2", "parallelism": NaN}', "parallelism", id="nan"),
    ],
)
def test_a_key_given_twice_or_a_non_json_number_is_refused(served: Served, body: str, key: str) -> None:
    answer = served.call("POST", "/flowconfigs", "carol", data=body)
    assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text
    assert stored_rows(served, "strict", "dup") == stored_rows(served, "strict", "dup2") == []


def test_a_put_without_owner_keeps_the_owner_and_only_the_owner_or_an_admin_may_send_it(served: Served) -> None:
    """Leaving `owner` out never re-owns a flow: the flow keeps running as its owner. An admin may
    leave it out (the owner stays); so may the owner; another owner of the group must name itself
    to take the flow over (then the packs must allow it)."""
    assert served.call("POST", "/flowconfigs", "carol", json=flow("owned", "orders")).status_code == 201
    edited = served.call("PUT", "/flowconfigs/owned/orders", "admin", json={**FLOW, "description": "by admin"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["owner"] == "carol" and edited.json()["changedBy"] == "admin"
    assert json.loads(stored_rows(served, "owned", "orders")[-1]["config"])["owner"] == "carol"

    served.user("frank", "analysts")  # allowed by the demo's pack, not carol
    groups = served.call("PUT", "/flowgroups/owned", "carol", json={"owners": ["carol", "frank"]})
    assert groups.status_code == 200, groups.text
    silent = served.call("PUT", "/flowconfigs/owned/orders", "frank", json={**FLOW, "description": "by frank"})
    assert (silent.status_code, silent.json()["key"]) == (403, "owner"), silent.text
    assert "`carol`" in silent.json()["detail"]
    taken = served.call("PUT", "/flowconfigs/owned/orders", "frank", json={**FLOW, "owner": "frank"})
    assert taken.status_code == 200 and taken.json()["owner"] == "frank", taken.text
    rows = DeltaTable(str(served.warehouse / "_engine" / "service" / "flowconfigs")).to_pyarrow_table().to_pylist()
    mine = sorted((r for r in rows if r["flow_group"] == "owned"), key=lambda r: r["version"])
    owners = [json.loads(r["config"])["owner"] for r in mine]
    assert owners == ["carol", "carol", "frank"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("PUT", "/flowgroups/bad%20name", id="put-space"),
        pytest.param("PUT", f"/flowgroups/{'g' * 33}", id="put-too-long"),
        pytest.param("PUT", "/flowgroups/-dash", id="put-dash-first"),
        pytest.param("GET", "/flowgroups/bad%20name", id="get-space"),
    ],
)
def test_a_flow_group_is_named_as_in_a_flow(served: Served, method: str, path: str) -> None:
    answer = served.call(method, path, "admin", json={"owners": ["carol"]})
    assert (answer.status_code, answer.json()["key"]) == (422, "flowGroup"), answer.text
    assert "bad name" not in {r["flow_group"] for r in _group_rows(served)}


def _group_rows(served: Served) -> list[dict[str, Any]]:
    table = served.warehouse / "_engine" / "service" / "flowgroups"
    return DeltaTable(str(table)).to_pyarrow_table().to_pylist() if table.is_dir() else []


@pytest.mark.parametrize(
    ("path", "params", "key"),
    [
        pytest.param("/flowstatuses/strict/x", {"limit": -1}, "limit", id="statuses-negative"),
        pytest.param("/flowstatuses/strict/x", {"limit": 0}, "limit", id="statuses-zero"),
        pytest.param("/flowstatuses/strict/x", {"limit": 100_000}, "limit", id="statuses-huge"),
        pytest.param("/flowstatuses/strict/x", {"limit": "1.5"}, "limit", id="statuses-float"),
        pytest.param("/flowconfigs", {"limit": -1}, "limit", id="list-negative"),
        pytest.param("/flowconfigs", {"offset": -1}, "offset", id="list-offset"),
        pytest.param("/flowconfigs", {"flowGroup": "../x"}, "flowGroup", id="list-group"),
        pytest.param("/flowconfigs", {"flowgroup": "x"}, "flowgroup", id="list-unknown-parameter"),
        pytest.param("/flowconfigs/strict/x/history", {"limit": -1}, "limit", id="history-negative"),
        pytest.param("/whoami", {"debug": "1"}, "debug", id="unknown-parameter"),
    ],
)
def test_a_bad_query_parameter_is_a_422_naming_it(served: Served, path: str, params: dict[str, Any], key: str) -> None:
    answer = served.call("GET", path, "carol", params=params)
    assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text
    assert key in answer.json()["detail"]


def test_an_execution_request_takes_only_its_two_keys(served: Served) -> None:
    for body, key in [
        ({"flowGroup": "strict", "flowName": "x", "frob": 1}, "frob"),
        ({"flowGroup": "strict", "flowName": 5}, "flowName"),
        ({"flowName": "x"}, "flowGroup"),
    ]:
        answer = served.call("POST", "/flowexecutions", "carol", json=body)
        assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text
