"""The API documents itself (issue 59, item 5): ``/openapi.json`` of a real ``serve.sh`` gives every
route's request body and answer as a typed schema, with the limits the service enforces declared
on the fields, and a field over its declared limit is refused as before (422 naming it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.conftest import Served
from tests.service.test_api import flow

MAX_GROUP, MAX_NAME, MAX_DESCRIPTION, MAX_OWNERS = 32, 64, 2000, 64
"""The limits the README declares."""
BODIES = {
    ("post", "/flowconfigs"): "NewFlowConfig",
    ("put", "/flowconfigs/{group}/{name}"): "FlowConfigVersion",
    ("put", "/flowgroups/{group}"): "FlowGroupOwners",
    ("post", "/flowexecutions"): "ExecutionRequest",
}
"""The routes that take a body, and its model."""
TEXT = {("get", "/metrics"), ("get", "/flowexecutions/{execution}/output")}
"""The routes that answer text, not JSON."""


@pytest.fixture(scope="module")
def schema(served: Served) -> dict[str, Any]:
    answer = served.call("GET", "/openapi.json")
    assert answer.status_code == 200, answer.text[:500]
    found: dict[str, Any] = answer.json()
    return found


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in schema["paths"].items() for method, op in ops.items()]


def model(schema: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """The component a ``$ref`` (or an array of them) names; it must be an object with properties."""
    ref = ref.get("items", ref)
    assert "$ref" in ref, ref
    found: dict[str, Any] = schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[-1]]
    assert found["type"] == "object" and found["properties"], found
    return found


def test_every_route_that_takes_a_body_documents_its_model(schema: dict[str, Any]) -> None:
    taking = {(m, p) for m, p, op in operations(schema) if "requestBody" in op}
    assert taking == set(BODIES)
    for (method, path), name in BODIES.items():
        body = schema["paths"][path][method]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{name}"}
        model(schema, body["content"]["application/json"]["schema"])


def test_every_route_documents_a_typed_answer(schema: dict[str, Any]) -> None:
    ops = operations(schema)
    assert len(ops) == 18, [(m, p) for m, p, _ in ops]
    for method, path, op in ops:
        success = [code for code in op["responses"] if code in ("200", "201", "202")]
        assert len(success) == 1, (method, path, op["responses"])
        content = op["responses"][success[0]]["content"]
        if (method, path) in TEXT:
            assert next(iter(content.values()))["schema"] == {"type": "string"}, (method, path)
        else:
            model(schema, content["application/json"]["schema"])


def test_the_status_pages_are_not_the_api(schema: dict[str, Any]) -> None:
    assert not {"/", "/login", "/logout", "/flows/{group}/{name}"} & set(schema["paths"])


def test_the_limits_are_declared_on_the_fields(schema: dict[str, Any]) -> None:
    models = schema["components"]["schemas"]
    for name in ("NewFlowConfig", "ExecutionRequest"):
        fields = models[name]["properties"]
        assert fields["flowGroup"]["maxLength"] == MAX_GROUP and fields["flowName"]["maxLength"] == MAX_NAME
        assert fields["flowName"]["pattern"].startswith("^") and set(models[name]["required"]) == {
            "flowGroup",
            "flowName",
        }
    assert models["ExecutionRequest"]["additionalProperties"] is False
    described = models["NewFlowConfig"]["properties"]["description"]["anyOf"]
    assert {"type": "string", "maxLength": MAX_DESCRIPTION} in described
    assert models["FlowGroupOwners"]["properties"]["owners"]["maxItems"] == MAX_OWNERS
    assert models["FlowAnswer"]["properties"]["version"]["type"] == "integer"


@pytest.mark.parametrize(
    ("method", "path", "body", "key"),
    [
        pytest.param(
            "POST", "/flowexecutions", {"flowGroup": "lim", "flowName": "n" * (MAX_NAME + 1)}, "flowName", id="run"
        ),
        pytest.param("POST", "/flowconfigs", flow("g" * (MAX_GROUP + 1), "a"), "flowGroup", id="flow-group"),
        pytest.param(
            "PUT", "/flowgroups/lim", {"owners": [f"u{i}" for i in range(MAX_OWNERS + 1)]}, "owners", id="owners"
        ),
    ],
)
def test_a_field_over_its_declared_limit_is_a_422_naming_it(
    served: Served, method: str, path: str, body: dict[str, Any], key: str
) -> None:
    answer = served.call(method, path, "admin", json=body)
    assert (answer.status_code, answer.json()["key"]) == (422, key), answer.text[:500]
    assert "at most" in answer.json()["detail"]
