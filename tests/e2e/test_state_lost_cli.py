"""Lost state through ``./spark-submit.sh``, as the user met it: the demo run, ``_engine/state``
deleted, the rerun refused (exit 2) with nothing written, and the command the message gives
acknowledges it."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT

pytestmark = pytest.mark.e2e


def submit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=900, cwd=REPO)


def last_line(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(parsed, dict)
    return parsed


def test_a_deleted_state_table_is_refused_and_the_given_command_starts_over(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    first = submit("job=demo/orders", f"warehouse={wh}")
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.rmtree(wh / "_engine" / "state")
    orders = DeltaTable(str(wh / "orders")).version()

    again = submit("job=demo/orders", f"warehouse={wh}")

    assert again.returncode == 2, again.stderr[-3000:]
    refused = last_line(again)
    message = str(refused["message"])
    assert refused["status"] == "CONFIG_ERROR"
    assert f"the state table {wh}/_engine/state is missing" in message
    assert DeltaTable(str(wh / "orders")).version() == orders  # nothing written
    assert len(DeltaTable(str(wh / "orders")).to_pyarrow_table()) == 40
    assert not (wh / "_engine" / "state").exists()

    given = message[message.index("mode=checkpoint") : message.index(" (with this run")]
    reason = "checkpoint.reason=state deleted in the e2e test"
    words = [reason if w.startswith("checkpoint.reason=") else w for w in shlex.split(given)]
    assert words[:3] == ["mode=checkpoint", "checkpoint.action=start_over", "checkpoint.dag=orders"]
    ack = submit("job=demo/orders", f"warehouse={wh}", *words)

    assert ack.returncode == 0, ack.stderr[-3000:]
    assert (last_line(ack)["status"], last_line(ack)["action"]) == ("CHANGED", "start_over")
