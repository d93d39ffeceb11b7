"""The flow service's declared limits (issue 58, item 11), against a real ``serve.sh``: names short
enough that every file name derived from them fits (the run of such a flow: in this process), a
body and fields of bounded size (413 or 422 naming the field, never a 500 that shows a server path
nor a misleading 503), list answers without the flows' bulk, and requests that must arrive whole
within ``--request-timeout``."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import REPO
from tests.service.conftest import Served, service_env
from tests.service.test_api import FLOW, flow, stored_rows

MAX_GROUP, MAX_NAME, MAX_DESCRIPTION, MAX_BODY = 32, 64, 2000, 64 * 1024
"""The limits the README declares."""


def leaks_nothing(text: str) -> bool:
    return str(REPO) not in text and "jobs/flows" not in text and "Errno" not in text


@pytest.mark.parametrize(
    ("group", "name", "key"),
    [
        pytest.param("lim", "a" * 10_000, "flowName", id="name-10k"),
        pytest.param("lim", "a" * 270, "flowName", id="name-270"),
        pytest.param("lim", "a" * 240, "flowName", id="name-240"),
        pytest.param("lim", "a" * (MAX_NAME + 1), "flowName", id="name-one-over"),
        pytest.param("g" * (MAX_GROUP + 1), "a", "flowGroup", id="group-one-over"),
        pytest.param("g" * 300, "a", "flowGroup", id="group-300"),
    ],
)
def test_a_name_too_long_is_a_422_naming_it(served: Served, group: str, name: str, key: str) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow(group, name))
    assert (made.status_code, made.json()["key"]) == (422, key), made.text[:500]
    assert "at most" in made.json()["detail"] and leaks_nothing(made.text)
    assert stored_rows(served, group, name) == []
    read = served.call("GET", f"/flowconfigs/{group}/{name}", "carol")
    assert (read.status_code, read.json()["key"]) == (422, key), read.text[:500]
    assert leaks_nothing(read.text)


def test_the_status_page_of_a_name_too_long_is_not_found(served: Served) -> None:
    page = served.call("GET", f"/flows/lim/{'a' * 10_000}", cookies={"engine_token": served.tokens["carol"]})
    assert page.status_code == 404 and leaks_nothing(page.text), page.text[:500]


def test_the_longest_names_are_accepted(served: Served) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow("g" * MAX_GROUP, "n" * MAX_NAME))
    assert made.status_code == 201, made.text


@pytest.mark.parametrize(
    ("more", "key"),
    [
        pytest.param({"description": "d" * (MAX_DESCRIPTION + 1)}, "description", id="description"),
        pytest.param({"schedule": "0 * * * * " + " " * 300}, "schedule", id="schedule"),
        pytest.param({"properties": {"k" * 300: 1}}, "properties", id="property-name"),
        pytest.param({"properties": {"v": "x" * 20_000}}, "properties.v", id="property-value"),
        pytest.param({"datasets": [f"d{i}" for i in range(501)]}, "datasets", id="datasets"),
        pytest.param({"destinations": ["demo_replica"] * 33}, "destinations", id="destinations"),
    ],
)
def test_a_field_too_large_is_a_422_naming_it(served: Served, more: dict[str, Any], key: str) -> None:
    made = served.call("POST", "/flowconfigs", "carol", json=flow("lim", "field", **more))
    assert (made.status_code, made.json()["key"]) == (422, key), made.text[:500]
    assert stored_rows(served, "lim", "field") == []


def test_a_body_too_large_is_a_413_and_is_not_read_whole(served: Served) -> None:
    big = flow("lim", "big", description="d" * (5 * 1024 * 1024))
    answer = served.call("POST", "/flowconfigs", "carol", json=big)
    assert answer.status_code == 413, answer.text[:500]
    assert f"at most {MAX_BODY} bytes" in answer.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"flowGroup": "lim", "flowName": "big", "description": "'
        for _ in range(50):
            yield b"d" * 1024 * 1024
        yield b'"}'

    started = time.monotonic()
    streamed = served.call("POST", "/flowconfigs", "carol", data=chunks())
    assert streamed.status_code == 413, streamed.text[:500]
    assert time.monotonic() - started < 20
    assert stored_rows(served, "lim", "big") == []


def test_a_list_answers_each_flow_without_its_bulk_and_in_pages(served: Served) -> None:
    bulk = {f"p{i}": "v" * 1000 for i in range(40)}  # 40 KB of properties in each flow
    for i in range(12):
        body = flow("biglist", f"f{i:02d}", description="d" * MAX_DESCRIPTION, properties=bulk)
        assert served.call("POST", "/flowconfigs", "carol", json=body).status_code == 201
    listed = served.call("GET", "/flowconfigs", "carol", params={"flowGroup": "biglist"})
    assert listed.status_code == 200 and len(listed.json()) == 12
    assert len(listed.content) < 12 * 2000, f"{len(listed.content)} bytes for 12 flows"
    first = listed.json()[0]
    assert "properties" not in first and first["flowName"] == "f00" and first["source"] == FLOW["source"]
    assert listed.headers["x-total-count"] == "12"
    whole = served.call("GET", "/flowconfigs/biglist/f00", "carol").json()
    assert whole["properties"] == bulk and whole["description"] == "d" * MAX_DESCRIPTION

    page = served.call("GET", "/flowconfigs", "carol", params={"flowGroup": "biglist", "limit": 5, "offset": 10})
    assert [f["flowName"] for f in page.json()] == ["f10", "f11"] and page.headers["x-total-count"] == "12"


# -- slow and partial requests ------------------------------------------------------------------

TIMEOUT = 2


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("impatient")
    found = Served(tmp / "wh", service_env(tmp), flags=("--no-scheduler", "--request-timeout", str(TIMEOUT)))
    found.user("carol", "analysts")
    found.start()
    yield found
    found.stop_gracefully()


def _answer(served: Served, sent: bytes) -> tuple[bytes, float]:
    """Send ``sent`` on a raw connection and stop: what comes back before the service closes it, and when."""
    sent = sent.replace(b"{token}", served.tokens["carol"].encode())
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", served.port), timeout=TIMEOUT * 10) as conn:
        conn.sendall(sent)
        got = b""
        try:
            while chunk := conn.recv(65536):
                got += chunk
        except TimeoutError:
            return got + b"<still open>", time.monotonic() - started
    return got, time.monotonic() - started


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        pytest.param(b"", b"", id="nothing"),
        pytest.param(b"POST /flowconfigs HTTP/1.1\r\nHost: x\r\nContent-Le", b"408", id="half-a-head"),
        pytest.param(
            b"POST /flowconfigs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 400\r\n\r\n"
            b'{"flowGroup": "x", ',
            b"408",
            id="half-a-body",
        ),
    ],
)
def test_a_partial_request_is_timed_out_and_its_connection_closed(
    impatient: Served, sent: bytes, status: bytes
) -> None:
    got, took = _answer(impatient, sent)
    assert b"<still open>" not in got, f"still open after {took:.1f} s: {got!r}"
    assert took < TIMEOUT * 4 and status in got.split(b"\r\n", 1)[0], got
    assert impatient.call("GET", "/whoami", "carol").status_code == 200, "the service still answers"


def test_a_complete_request_is_answered_however_its_connection_is_kept(impatient: Served) -> None:
    with socket.create_connection(("127.0.0.1", impatient.port), timeout=10) as conn:
        for _ in range(2):  # two requests on one connection, the second after a pause
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while not got.endswith(b"}"):  # the head, then the JSON body
                got += conn.recv(65536)
            assert got.startswith(b"HTTP/1.1 200 OK") and b'"status":"ok"' in got, got
            time.sleep(TIMEOUT * 0.75)


def test_a_flow_with_the_longest_names_runs(spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file a run names after the flow (its lease, its hops' staging and copy records) fits.
    The run the service would start, in this process: the stored flow written as the service
    writes it for its execution (``runs/<id>/flows/<group>/<name>.yaml``, read through
    ``ENGINE_FLOWS_DIR``), its owner's groups in ``ENGINE_OWNER_GROUPS``, then the command line
    the service runs. That the API takes the longest names is
    :func:`test_the_longest_names_are_accepted`, on a real service."""
    from engine.config.jobs_source import FLOWS_DIR_ENV
    from engine.service.executions import OWNER_GROUPS_ENV, FlowStatusReader, _runnable
    from tests.commit.harness import run_here

    group, name = "g" * MAX_GROUP, "n" * MAX_NAME
    flows = tmp_path / "runs" / "execution" / "flows"
    (flows / group).mkdir(parents=True)
    stored = {**flow(group, name), "owner": "carol"}  # the owner the service sets: the sender
    (flows / group / f"{name}.yaml").write_text(json.dumps(_runnable(stored), indent=2))
    monkeypatch.setenv(FLOWS_DIR_ENV, str(flows))
    monkeypatch.setenv(OWNER_GROUPS_ENV, "analysts")  # carol's groups
    wh = tmp_path / "wh"
    printed: list[str] = []
    code, summary = run_here(REPO / "jobs", wh, "mode=run", "progress=off", job=f"flow={group}/{name}", printed=printed)
    assert code == 0 and summary["status"] == "SUCCEEDED", "\n".join(printed)[-4000:]
    found = FlowStatusReader(f"{wh}/_engine/flow_executions").execution(summary["run_id"])  # as the service reads it
    assert found is not None and found["end_time"] is not None, found
    assert [j["executionStatus"] for j in json.loads(found["job_statuses"] or "[]")] == ["SUCCEEDED", "SUCCEEDED"]
