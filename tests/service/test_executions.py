"""Executions through the service, end to end: each is a real ``spark-submit.sh flow=...`` run.

One flow is run twice at once (the second is SKIPPED: two executions of a flow never overlap),
the service is killed while the first runs and started again, and the first is found, watched and
ends SUCCEEDED with its hops; its data is read with delta-rs and pyarrow. Other executions are
cancelled through the API: while running, at once, and in the first seconds (before the driver can
take the signal)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.service.conftest import ARTIFACTS, Served, service_env
from tests.watchdog import children

pytestmark = pytest.mark.e2e

FLOW = {"source": "demo_landing", "destinations": ["demo_replica"], "datasets": ["orders"]}
ENDED = ("SUCCEEDED", "PARTIAL", "FAILED", "SKIPPED", "CANCELLED")
RUN_SECONDS = 300.0


def wait_for(served: Served, execution: str, who: str, *, until: tuple[str, ...] = ENDED) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        found = served.call("GET", f"/flowexecutions/{execution}", who).json()
        if found["executionStatus"] in until:
            return found  # type: ignore[no-any-return]
        time.sleep(1)
    output = served.call("GET", f"/flowexecutions/{execution}/output", who).text
    service = served.log.read_text(errors="replace") if served.log else ""
    raise AssertionError(
        f"execution {execution} did not reach {until}: {found}\n--- its output (tail):\n{output[-8000:]}"
        f"\n--- the service's log (tail):\n{service[-4000:]}"
    )


def started(served: Served) -> bool:
    """Whether the run's driver has begun (its lease is taken: a cancel now is the run's)."""
    return any((served.warehouse / "_engine" / "leases").glob("flow.*/*.json"))


@pytest.fixture
def own_service(tmp_path: Path) -> Served:
    served = Served(tmp_path / "wh", service_env(tmp_path))
    served.user("carol", "analysts")
    served.user("bob", "ops")
    return served.start()


def test_a_flow_runs_once_at_a_time_and_survives_its_service_being_killed(own_service: Served, browser: Any) -> None:
    served = own_service
    made = served.call("POST", "/flowconfigs", "carol", json={"flowGroup": "team", "flowName": "orders", **FLOW})
    assert made.status_code == 201, made.text
    first = served.call("POST", "/flowexecutions", "carol", json={"flowGroup": "team", "flowName": "orders"})
    second = served.call("POST", "/flowexecutions", "carol", json={"flowGroup": "team", "flowName": "orders"})
    assert first.status_code == second.status_code == 201
    one, two = first.json()["flowExecutionId"], second.json()["flowExecutionId"]
    assert first.json()["executionStatus"] == "RUNNING" and first.json()["requestedBy"] == "carol"
    served.stop(signal.SIGKILL)  # both runs go on without their service
    served.start()  # and are found again: watched until they end

    ended = {e: wait_for(served, e, "carol") for e in (one, two)}
    statuses = sorted(e["executionStatus"] for e in ended.values())
    assert statuses == ["SKIPPED", "SUCCEEDED"], ended  # whichever run took the flow's lease first
    ran, skipped = sorted(ended.values(), key=lambda e: e["executionStatus"] == "SKIPPED")
    assert skipped["exitCode"] == 3 and ran["flowExecutionId"] in skipped["message"], "the reason names the other"
    done = ran
    assert done["exitCode"] == 0, served.call("GET", f"/flowexecutions/{done['flowExecutionId']}/output", "carol").text
    hops = {j["jobName"]: j for j in done["jobStatuses"]}
    assert [hops[h]["executionStatus"] for h in ("demo_landing_to_lake", "demo_lake_to_replica")] == ["SUCCEEDED"] * 2
    assert hops["demo_landing_to_lake"]["processedCount"] == 48 and hops["demo_landing_to_lake"]["errorCount"] == 2
    assert hops["demo_landing_to_lake"]["highWatermark"], "the hop's watermark is part of its status"

    lake = DeltaTable(str(served.warehouse / "lake" / "orders")).to_pyarrow_table()
    assert lake.num_rows == 46  # 48 read, 2 rejected to the error table
    replica = [p for p in (served.warehouse / "replica" / "orders").glob("*.parquet")]
    assert sum(pq.read_table(p).num_rows for p in replica) == 46

    listed = served.call("GET", "/flowstatuses/team/orders", "carol").json()
    assert [s["flowExecutionId"] for s in listed] == [two, one], "newest first"
    assert {s["flowExecutionId"]: s["executionStatus"] for s in listed} == {
        e: ended[e]["executionStatus"] for e in ended
    }
    output = served.call("GET", f"/flowexecutions/{done['flowExecutionId']}/output", "carol").text
    assert '"status": "SUCCEEDED"' in output and done["flowExecutionId"] in output
    assert served.call("GET", "/flowconfigs/team/orders/history", "carol").json()[0]["version"] == 1

    metrics = served.call("GET", "/metrics", "carol").text
    assert 'engine_flow_executions_total{status="SUCCEEDED"} 1.0' in metrics
    assert 'engine_flow_executions_total{status="SKIPPED"} 1.0' in metrics
    assert "engine_flow_execution_duration_seconds_count 2.0" in metrics and "engine_scheduler_leader 1.0" in metrics
    see_the_status_page(served, browser, done["flowExecutionId"])
    served.stop_gracefully()


def see_the_status_page(served: Served, browser: Any, execution: str) -> None:
    """Sign in with a token in a real browser, find the flow and its executions coloured by status,
    open the flow's page and its hops; keep screenshots."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shown
    from selenium.webdriver.support.ui import WebDriverWait

    def find(by: str, value: str) -> Any:
        return WebDriverWait(browser, 20).until(shown.presence_of_element_located((by, value)))

    browser.get(f"{served.url}/")
    assert browser.current_url.endswith("/login"), "not signed in: the page asks for a token"
    browser.find_element(By.ID, "token").send_keys("eng_wrong")
    browser.find_element(By.ID, "login").click()
    assert find(By.ID, "refused").is_displayed()
    find(By.ID, "token").send_keys(served.tokens["carol"])
    browser.find_element(By.ID, "login").click()
    assert find(By.ID, "user").text == "carol"
    badges = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "span.status")]
    assert sorted(badges) == ["SKIPPED", "SUCCEEDED"]
    green = browser.find_element(By.CSS_SELECTOR, "span.status.SUCCEEDED").value_of_css_property("background-color")
    assert green == "rgba(46, 125, 50, 1)", "a success is green"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "status-page-flows.png"))

    browser.find_element(By.LINK_TEXT, "orders").click()
    hops = find(By.ID, "hops").text
    assert execution in browser.find_element(By.TAG_NAME, "body").text
    assert "demo_landing_to_lake SUCCEEDED lake/files_to_delta 48 2" in hops
    assert "demo_lake_to_replica SUCCEEDED lake/table_copy 6 0" in hops
    browser.save_screenshot(str(ARTIFACTS / "status-page-flow.png"))
    outputs = browser.find_elements(By.LINK_TEXT, "output")
    ran = next(o for o in outputs if execution in o.get_attribute("href"))
    ran.click()
    WebDriverWait(browser, 20).until(lambda b: "/output" in b.current_url)
    assert '"status": "SUCCEEDED"' in find(By.TAG_NAME, "body").text


def test_a_running_execution_is_cancelled_gracefully(own_service: Served) -> None:
    served = own_service
    served.call("POST", "/flowconfigs", "carol", json={"flowGroup": "team", "flowName": "stopped", **FLOW})
    execution = served.call("POST", "/flowexecutions", "carol", json={"flowGroup": "team", "flowName": "stopped"})
    one = execution.json()["flowExecutionId"]
    assert served.call("DELETE", f"/flowexecutions/{one}", "bob").status_code == 403
    deadline = time.monotonic() + RUN_SECONDS
    while not started(served) and time.monotonic() < deadline:
        time.sleep(0.5)
    cancelled = served.call("DELETE", f"/flowexecutions/{one}", "carol")
    assert cancelled.status_code == 202 and cancelled.json()["cancelRequested"]
    done = wait_for(served, one, "carol")
    assert done["executionStatus"] == "CANCELLED" and done["message"] == "cancelled by carol"
    assert done["exitCode"] == 128 + signal.SIGTERM, "the run stopped on the signal: it did not end on its own"
    assert served.call("DELETE", f"/flowexecutions/{one}", "carol").status_code == 409
    lake = served.warehouse / "lake" / "orders"
    assert not lake.exists() or DeltaTable(str(lake)).to_pyarrow_table().num_rows in (0, 46), "all or nothing"
    served.stop_gracefully()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


def _jvm_before_its_driver(served: Served) -> bool:
    """An execution's SparkSubmit JVM runs (service -> record-exit shell -> spark-submit.sh -> JVM)
    and no driver of it takes SIGTERM yet (none started, or one that has not set its handler)."""
    assert served.proc is not None
    for shell in children(served.proc.pid):
        for wrapper in children(shell):
            for jvm in children(wrapper):
                line = _cmdline(jvm)
                if line.split(" ")[0].endswith("/java") and "org.apache.spark.deploy.SparkSubmit" in line:
                    return not any(_catches_sigterm(pid) for pid in children(jvm))
    return False


@pytest.mark.parametrize("moment", ["at-once", "before-the-driver"])
def test_a_cancel_in_the_first_seconds_stops_the_execution_and_publishes_nothing(
    own_service: Served, moment: str
) -> None:
    """A cancel right after the execution starts, and one once its JVM runs but before its driver
    can take SIGTERM: 202, then CANCELLED (exit 143), and nothing of the flow is published (no lake
    table rows, no replica file). Before the fix the second was answered 202 and ignored
    (``spark-submit.sh`` passed SIGTERM only to a driver that had its handler): the run published."""
    served = own_service
    served.call("POST", "/flowconfigs", "carol", json={"flowGroup": "team", "flowName": "early", **FLOW})
    started_at = served.call("POST", "/flowexecutions", "carol", json={"flowGroup": "team", "flowName": "early"})
    one = started_at.json()["flowExecutionId"]
    if moment == "before-the-driver":
        deadline = time.monotonic() + RUN_SECONDS
        while not _jvm_before_its_driver(served):
            assert time.monotonic() < deadline, "no JVM before its driver"
            time.sleep(0.005)
    cancelled = served.call("DELETE", f"/flowexecutions/{one}", "carol")
    assert cancelled.status_code == 202 and cancelled.json()["cancelRequested"], cancelled.text
    done = wait_for(served, one, "carol")
    output = served.call("GET", f"/flowexecutions/{one}/output", "carol").text
    assert done["executionStatus"] == "CANCELLED" and done["message"] == "cancelled by carol", output[-6000:]
    assert done["exitCode"] == 128 + signal.SIGTERM, output[-6000:]
    lake = served.warehouse / "lake" / "orders"
    assert not lake.exists() or DeltaTable(str(lake)).to_pyarrow_table().num_rows == 0, "nothing published"
    assert not list((served.warehouse / "replica").glob("**/*.parquet")), "nothing published"
    served.stop_gracefully()
