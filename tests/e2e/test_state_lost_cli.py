"""Lost state through the command line of ``./spark-submit.sh``, as the user met it (``run_cli``: in
this process, on the test session's Spark): the demo run, ``_engine/state`` deleted, the rerun
refused (exit 2) with nothing written, and the command the message gives acknowledges it."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from tests.e2e import REPO
from tests.helpers import run_cli

JOBS = REPO / "jobs"


def test_a_deleted_state_table_is_refused_and_the_given_command_starts_over(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    code, _, said = run_cli(JOBS, "job=demo/orders", f"warehouse={wh}")
    assert code == 0, said[-3000:]
    shutil.rmtree(wh / "_engine" / "state")
    orders = DeltaTable(str(wh / "orders")).version()

    code, refused, said = run_cli(JOBS, "job=demo/orders", f"warehouse={wh}")

    assert code == 2, said[-3000:]
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
    code, ack, said = run_cli(JOBS, "job=demo/orders", f"warehouse={wh}", *words)

    assert code == 0, said[-3000:]
    assert (ack["status"], ack["action"]) == ("CHANGED", "start_over")
