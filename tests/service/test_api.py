"""The HTTP contract of FlowConfigs, users and access, against a real ``serve.sh``: what is stored
is read back with delta-rs, not through the service."""

from __future__ import annotations

import json
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.service.conftest import Served

FLOW = {"source": "demo_landing", "destinations": ["demo_replica"], "datasets": ["orders"]}
"""A flow over the demo's graph (conf/topology/demo.conf); the template pack allows group analysts."""


def flow(group: str, name: str, **more: Any) -> dict[str, Any]:
    return {"flowGroup": group, "flowName": name, **FLOW, **more}


def stored_rows(served: Served, group: str, name: str) -> list[dict[str, Any]]:
    """The flow's rows in the service's table, read with delta-rs (none before the first flow is stored)."""
    path = served.warehouse / "_engine" / "service" / "flowconfigs"
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist() if (path / "_delta_log").is_dir() else []
    return sorted((r for r in rows if (r["flow_group"], r["flow_name"]) == (group, name)), key=lambda r: r["version"])


# -- authentication -----------------------------------------------------------------------------


def test_every_call_but_healthz_needs_a_known_token(served: Served) -> None:
    assert served.call("GET", "/healthz").json()["status"] == "ok"
    missing = served.call("GET", "/flowconfigs")
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer" in missing.json()["detail"]
    wrong = served.call("GET", "/flowconfigs", headers={"Authorization": "Bearer eng_not-a-token"})
    assert wrong.status_code == 401 and "unknown" in wrong.json()["detail"]
    assert served.call("GET", "/whoami", "carol").json() == {"name": "carol", "groups": ["analysts"], "admin": False}


def test_tokens_are_stored_only_as_hashes(served: Served) -> None:
    rows = DeltaTable(str(served.warehouse / "_engine" / "service" / "users")).to_pyarrow_table().to_pylist()
    assert {r["name"] for r in rows} >= {"admin", "carol", "bob"}
    text = json.dumps(rows, default=str)
    assert all(token not in text for token in served.tokens.values())
    assert all(len(r["token_sha256"]) == 64 for r in rows)


def test_a_user_added_again_gets_a_new_token_and_the_old_one_stops_working(served: Served) -> None:
    old = served.user("dave", "analysts")
    assert served.call("GET", "/whoami", "dave").status_code == 200
    served.user("dave", "analysts", "ops")
    assert served.call("GET", "/whoami", headers={"Authorization": f"Bearer {old}"}).status_code == 401
    assert served.call("GET", "/whoami", "dave").json()["groups"] == ["analysts", "ops"]


def test_the_openapi_schema_is_served(served: Served) -> None:
    paths = served.call("GET", "/openapi.json").json()["paths"]
    assert {"/flowconfigs", "/flowconfigs/{group}/{name}", "/flowexecutions", "/flowstatuses/{group}/{name}"} <= set(
        paths
    )


# -- flow configs -------------------------------------------------------------------------------


def test_create_read_update_list_history_and_delete(served: Served) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow("crud", "orders", description="first"))
    assert made.status_code == 201, made.text
    assert made.json()["version"] == 1 and made.json()["owner"] == "carol" and made.json()["origin"] == "api"
    again = served.call("POST", "/flowconfigs", "carol", json=flow("crud", "orders"))
    assert again.status_code == 409 and "exists" in again.json()["detail"]

    got = served.call("GET", "/flowconfigs/crud/orders", "bob").json()  # anyone signed in may read
    assert got["description"] == "first" and got["changedBy"] == "carol"
    changed = served.call("PUT", "/flowconfigs/crud/orders", "carol", json={**FLOW, "description": "second"})
    assert changed.status_code == 200 and changed.json()["version"] == 2
    renamed = served.call("PUT", "/flowconfigs/crud/orders", "carol", json={**FLOW, "flowName": "other"})
    assert renamed.status_code == 422 and renamed.json()["key"] == "flowName"

    served.call("POST", "/flowconfigs", "carol", json=flow("crud", "customers"))
    listed = served.call("GET", "/flowconfigs", "carol", params={"flowGroup": "crud"}).json()
    assert [(f["flowName"], f["version"]) for f in listed] == [("customers", 1), ("orders", 2)]
    everything = {(f["flowGroup"], f["flowName"]) for f in served.call("GET", "/flowconfigs", "carol").json()}
    assert {("crud", "orders"), ("demo", "orders_to_replica")} <= everything

    assert served.call("DELETE", "/flowconfigs/crud/orders", "carol").json()["version"] == 3
    assert served.call("GET", "/flowconfigs/crud/orders", "carol").status_code == 404
    assert served.call("DELETE", "/flowconfigs/crud/orders", "carol").status_code == 404
    history = served.call("GET", "/flowconfigs/crud/orders/history", "carol").json()
    assert [(h["version"], h["action"], h.get("description")) for h in history] == [
        (1, "create", "first"),
        (2, "update", "second"),
        (3, "delete", None),
    ]
    rows = stored_rows(served, "crud", "orders")
    assert [(r["version"], r["action"], r["changed_by"]) for r in rows] == [
        (1, "create", "carol"),
        (2, "update", "carol"),
        (3, "delete", "carol"),
    ]
    assert served.call("POST", "/flowconfigs", "carol", json=flow("crud", "orders")).json()["version"] == 4


def test_the_compiled_jobs_of_a_flow(served: Served) -> None:
    served.call("POST", "/flowconfigs", "carol", json=flow("specs", "orders"))
    plan = served.call("GET", "/flowconfigs/specs/orders/jobspecs", "carol").json()
    assert [(h["hop"], h["template"]) for h in plan["hops"]] == [
        ("demo_landing_to_lake", "lake/files_to_delta"),
        ("demo_lake_to_replica", "lake/table_copy"),
    ]
    assert plan["hops"][1]["job"]["fan_out"]["template"]["copy"]["target"] == f"{served.warehouse}/replica/{{dataset}}"


def test_flow_files_are_listed_and_read_only(served: Served) -> None:
    got = served.call("GET", "/flowconfigs/demo/orders_to_replica", "carol").json()
    assert got["origin"] == "file" and got["file"].endswith("jobs/flows/demo/orders_to_replica.conf")
    refused = served.call("PUT", "/flowconfigs/demo/orders_to_replica", "admin", json=FLOW)
    assert refused.status_code == 409 and "file" in refused.json()["detail"]
    into_files = served.call("POST", "/flowconfigs", "carol", json=flow("demo", "mine"))
    assert into_files.status_code == 403 and "only admins" in into_files.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status", "key", "said"),
    [
        pytest.param(flow("bad", "a", frob=1), 422, "frob", "unknown key", id="unknown-key"),
        pytest.param(
            {**flow("bad", "a"), "destinations": ["nowhere"]}, 422, "destinations[0]", "unknown data node", id="node"
        ),
        pytest.param(
            {"flowGroup": "bad", "flowName": "a", "templateUris": ["lake/nope"]},
            422,
            "templateUris[0]",
            "nope",
            id="template",
        ),
        pytest.param(flow("bad", "a", schedule="every day"), 422, "schedule", "cron", id="cron"),
        pytest.param(flow("bad", "a", schedule="0 0 30 2 *"), 422, "schedule", "cron", id="cron-never-fires"),
        pytest.param(flow("bad", "a", description="${HOME}"), 422, "description", "${", id="substitution"),
        pytest.param(flow("bad", "a b"), 422, "flowName", "letters", id="name"),
        pytest.param({"flowGroup": "bad"}, 422, "flowName", "needs", id="no-name"),
        pytest.param([1, 2], 422, None, "JSON object", id="not-an-object"),
    ],
)
def test_a_bad_flow_config_is_refused_naming_its_key_and_nothing_is_stored(
    served: Served, body: Any, status: int, key: str | None, said: str
) -> None:
    answer = served.call("POST", "/flowconfigs", "carol", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["key"] == key and said in answer.json()["detail"]
    assert served.call("GET", "/flowconfigs", "carol", params={"flowGroup": "bad"}).json() == []
    assert stored_rows(served, "bad", "a") == []


def test_malformed_json_is_a_readable_422(served: Served) -> None:
    answer = served.call("POST", "/flowconfigs", "carol", data='{"flowGroup": "x",')
    assert answer.status_code == 422 and "not JSON" in answer.json()["detail"]


def test_a_template_pack_refuses_a_user_outside_its_principals(served: Served) -> None:
    answer = served.call("POST", "/flowconfigs", "bob", json=flow("ops", "orders"))
    assert answer.status_code == 422 and answer.json()["key"] == "owner"
    assert "principal `bob` may not use template pack `lake`" in answer.json()["detail"]


# -- access -------------------------------------------------------------------------------------


def test_only_a_groups_owners_and_admins_change_or_run_its_flows(served: Served) -> None:
    assert served.call("POST", "/flowconfigs", "carol", json=flow("sales", "orders")).status_code == 201
    assert served.call("GET", "/flowgroups/sales", "bob").json()["owners"] == ["carol", "group:analysts"]
    for method, path, body in [
        ("PUT", "/flowconfigs/sales/orders", FLOW),
        ("DELETE", "/flowconfigs/sales/orders", None),
        ("POST", "/flowexecutions", {"flowGroup": "sales", "flowName": "orders"}),
        ("PUT", "/flowgroups/sales", {"owners": ["bob"]}),
    ]:
        answer = served.call(method, path, "bob", json=body)
        assert answer.status_code == 403, (method, path, answer.text)
        assert "user `bob` (groups: ops) may not" in answer.json()["detail"]
    named_other = served.call("PUT", "/flowconfigs/sales/orders", "carol", json={**FLOW, "owner": "demo"})
    assert named_other.status_code == 403 and named_other.json()["key"] == "owner"
    assert served.call("PUT", "/flowconfigs/sales/orders", "admin", json={**FLOW, "owner": "demo"}).status_code == 200
    assert served.call("PUT", "/flowgroups/sales", "carol", json={"owners": ["carol", "bob"]}).status_code == 200
    assert served.call("PUT", "/flowconfigs/sales/orders", "bob", json={**FLOW, "owner": "demo"}).status_code == 403
    assert [r["version"] for r in stored_rows(served, "sales", "orders")] == [1, 2]


# -- secrets ------------------------------------------------------------------------------------


def test_secrets_are_stored_encrypted_never_returned_and_kept_when_sent_back_redacted(served: Served) -> None:
    body = flow("vault", "orders", properties={"db": {"password": "hunter2-secret"}, "plain": "x"})
    made = served.call("POST", "/flowconfigs", "carol", json=body)
    assert made.status_code == 201, made.text
    assert made.json()["properties"] == {"db": {"password": "***"}, "plain": "x"}
    [row] = stored_rows(served, "vault", "orders")
    assert "hunter2-secret" not in row["config"]
    assert json.loads(row["config"])["properties"]["db"]["password"].startswith("ENC(")

    got = served.call("GET", "/flowconfigs/vault/orders", "carol").json()
    sent_back = {k: v for k, v in got.items() if k in ("source", "destinations", "datasets", "properties")}
    assert served.call("PUT", "/flowconfigs/vault/orders", "carol", json=sent_back).status_code == 200
    rows = stored_rows(served, "vault", "orders")
    assert json.loads(rows[1]["config"])["properties"]["db"] == json.loads(rows[0]["config"])["properties"]["db"]
    history = served.call("GET", "/flowconfigs/vault/orders/history", "carol").text
    assert "hunter2-secret" not in history and "ENC(" not in history


def test_secrets_at_any_depth_are_sealed_and_never_answered(served: Served) -> None:
    properties = {
        "credentials": {"user": "u-1", "pass": "p-plain-1"},
        "conn": {"secretKey": {"v": "nested-plain-2"}},
        "api_token": ["tok-plain-3"],
    }
    made = served.call("POST", "/flowconfigs", "carol", json=flow("vault", "deep", properties=properties))
    assert made.status_code == 201, made.text
    [row] = stored_rows(served, "vault", "deep")
    stored = json.loads(row["config"])["properties"]
    assert stored["credentials"]["pass"].startswith("ENC(") and stored["api_token"][0].startswith("ENC(")
    answers = [
        made.text,
        served.call("GET", "/flowconfigs/vault/deep", "bob").text,
        served.call("GET", "/flowconfigs/vault/deep/history", "bob").text,
        served.call("GET", "/flowconfigs/vault/deep/jobspecs", "bob").text,
        served.call("GET", "/flowconfigs", "bob", params={"flowGroup": "vault"}).text,
    ]
    for text in answers:
        assert not any(p in text for p in ("p-plain-1", "nested-plain-2", "tok-plain-3", "u-1", "ENC(")), text
        # (the demo's templates read no property; a list shows no flow's properties)
        assert "***" in text or '"hops"' in text or '"properties"' not in text
    for body, key in [
        (flow("vault", "x", properties={"password": 12345}), "properties.password"),
        (flow("vault", "x", properties={"path": "ENC(gAAAAB-copied)"}), "properties.path"),
        (flow("vault", "x", properties={"password": "***"}), "properties.password"),
    ]:
        refused = served.call("POST", "/flowconfigs", "carol", json=body)
        assert (refused.status_code, refused.json()["key"]) == (422, key), refused.text
    assert stored_rows(served, "vault", "x") == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("POST", "/flowexecutions", {"flowGroup": "/tmp", "flowName": "secret"}, id="run-absolute"),
        pytest.param("POST", "/flowexecutions", {"flowGroup": "../demo", "flowName": "orders"}, id="run-parent"),
        pytest.param("GET", "/flowconfigs/..%2Fdemo/orders", None, id="read-encoded-parent"),
        pytest.param("GET", "/flowconfigs/.hidden/x/history", None, id="history-dot"),
    ],
)
def test_flow_names_never_reach_the_file_system(served: Served, method: str, path: str, body: Any) -> None:
    answer = served.call(method, path, "admin", json=body)
    assert answer.status_code in (404, 422), answer.text
    assert "orders.conf" not in answer.text and "jobs/demo" not in answer.text


def test_run_immediately_is_a_boolean_and_bad_values_are_refused(served: Served) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow("imm", "later", runImmediately=False))
    assert made.status_code == 201 and "flowExecutionId" not in made.json()
    assert served.call("GET", "/flowstatuses/imm/later", "carol").json() == []
    for body, key in [
        (flow("imm", "x", owner=["carol"]), "owner"),
        (flow("imm", "x", runImmediately="soon"), "runImmediately"),
        (flow("imm", "x", runImmediately="false"), "runImmediately"),  # a boolean, not its text (test_strict.py)
    ]:
        answer = served.call("POST", "/flowconfigs", "carol", json=body)
        assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text
    nested = served.call(
        "POST", "/flowconfigs", "carol", data='{"flowGroup": "imm", "x": ' + "[" * 30_000 + "]" * 30_000 + "}"
    )
    assert nested.status_code == 422 and "nested too deeply" in nested.json()["detail"], nested.text


def test_of_two_users_making_one_group_at_once_one_owns_it(served: Served) -> None:
    """erin (group analysts) and demo (group other) may both use the demo's template pack but share
    no principal: whoever makes group `raced` first owns it, and the other is refused."""
    from concurrent.futures import ThreadPoolExecutor

    served.user("erin", "analysts")
    served.user("demo", "other")
    with ThreadPoolExecutor(2) as pool:
        answers = dict(
            zip(
                ["erin", "demo"],
                pool.map(
                    lambda who: served.call("POST", "/flowconfigs", who, json=flow("raced", f"by_{who}")),
                    ["erin", "demo"],
                ),
                strict=True,
            )
        )
    owners = served.call("GET", "/flowgroups/raced", "erin").json()["owners"]
    winner = "erin" if "erin" in owners else "demo"
    loser = "demo" if winner == "erin" else "erin"
    assert (answers[winner].status_code, answers[loser].status_code) == (201, 403), {
        k: v.text for k, v in answers.items()
    }
    assert [
        f["flowName"] for f in served.call("GET", "/flowconfigs", "erin", params={"flowGroup": "raced"}).json()
    ] == [f"by_{winner}"]
