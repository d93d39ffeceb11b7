"""The console while a job runs: a live view on a terminal, log lines elsewhere, the final table."""

from __future__ import annotations

import io
import logging

import pytest

from engine.cli.progress import shown, table
from engine.runtime.progress import PUBLISHING, RUNNING, Board


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_view_redraws_in_place_and_keeps_the_final_state() -> None:
    board, screen = Board(), Terminal()
    board.add(["orders", "customers"])
    with shown(board, "auto", out=screen):
        board.move("orders", RUNNING, records=1200)
        board.move("customers", PUBLISHING)
        board.move("orders", "SUCCEEDED", records=1200)
    text = screen.getvalue()
    assert "\x1b[" in text  # cursor movement: drawn in place
    last = text.rsplit("jobdags:", 1)[1]
    assert last.startswith(" 1/2 done")
    assert "orders" in last and "SUCCEEDED" in last and "1,200 records" in last
    assert "customers" in last and "publishing" in last


def test_elsewhere_each_change_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    board, out = Board(), io.StringIO()  # not a terminal
    board.add(["orders"])
    with caplog.at_level(logging.INFO, logger="engine.progress"), shown(board, "auto", out=out):
        board.move("orders", RUNNING)
        board.move("orders", "FAILED", records=0, message="boom")
    assert out.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "dag orders: running"
    assert lines[1].startswith("dag orders: failed in ") and lines[1].endswith(", 0 records")


def test_the_final_table_has_a_row_per_dag() -> None:
    summary = {
        "dags": [
            {
                "name": "orders",
                "status": "SUCCEEDED",
                "records_read": 48,
                "sinks": {"lake": 40, "big": 15},
                "records_rejected": 7,
                "seconds": 3.21,
                "executor_seconds": 1.5,
            },
            {
                "name": "customers",
                "status": "SKIPPED",
                "records_read": 0,
                "sinks": {},
                "records_rejected": 0,
                "seconds": 0,
                "executor_seconds": 0,
            },
        ]
    }
    summary["dags"].append({**summary["dags"][0], "name": "copy", "sinks": {"target": 1234}})
    lines = table(summary).splitlines()
    assert lines[0].split() == [
        "dag", "status", "read", "rejected", "written", "(per", "sink)", "seconds", "cost", "(exec", "s)"
    ]  # fmt: skip
    # each sink's count on a row of its own: a sum over sinks (55 here) counts records twice
    assert lines[2].split() == ["orders", "SUCCEEDED", "48", "7", "3.2", "1.5"]
    assert lines[3].split() == ["lake", "40"]
    assert lines[4].split() == ["big", "15"]
    assert lines[5].split() == ["customers", "SKIPPED", "0", "0", "0", "0.0", "0.0"]
    assert lines[6].split() == ["copy", "SUCCEEDED", "48", "7", "1,234", "(target)", "3.2", "1.5"]
    assert all("55" not in line for line in lines)


def test_a_count_moving_within_a_phase_logs_no_new_line(caplog: pytest.LogCaptureFixture) -> None:
    board = Board()
    board.add(["orders", "customers"])
    with caplog.at_level(logging.INFO, logger="engine.progress"), shown(board, "log", heartbeat=60):
        board.move("orders", RUNNING)
        board.move("customers", RUNNING)
        board.move("orders", RUNNING, records=48)  # the read count arrives
        board.move("orders", PUBLISHING)
        board.move("orders", "SUCCEEDED")
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == [
        "dag orders: running",
        "dag customers: running",
        "dag orders: publishing",
        "dag orders: succeeded",
    ]
