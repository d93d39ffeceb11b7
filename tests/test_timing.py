"""The test command's timing report (tests/timing.py): a real pytest run records every test's three
parts, and the report sums them per directory and per file beside the command's own phases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import timing

REPO = Path(__file__).resolve().parents[1]


def test_a_pytest_run_records_each_test_s_set_up_call_and_tear_down(tmp_path: Path) -> None:
    suite = tmp_path / "suite" / "pkg"
    suite.mkdir(parents=True)
    (suite / "test_some.py").write_text(
        "import time, pytest\n"
        "@pytest.fixture\n"
        "def slow_set_up():\n"
        "    time.sleep(0.2)\n"
        "    yield\n"
        "def test_fast(): pass\n"
        "def test_sleeps(slow_set_up): time.sleep(0.3)\n"
        "def test_fails(): assert False\n"
    )
    out = tmp_path / "timing"
    env = {**os.environ, "ENGINE_TEST_TIMING": str(out), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.timing", "-c", os.devnull, "--rootdir", str(tmp_path),
         str(tmp_path / "suite")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout  # the failing test fails the run; the report is written anyway
    rows = {r["test"].split("::")[-1]: r for r in json.loads((out / "tests.json").read_text())["tests"]}
    assert sorted(rows) == ["test_fails", "test_fast", "test_sleeps"]
    assert rows["test_sleeps"]["setup"] >= 0.2 and rows["test_sleeps"]["call"] >= 0.3
    assert {"setup", "call", "teardown"} <= set(rows["test_fast"])
    assert (rows["test_fails"]["outcome"], rows["test_fast"]["outcome"]) == ("failed", "passed")

    (out / "phases.tsv").write_text("virtualenv\t0.1\npytest\t3.0\n")
    text = timing.report(out, top=2)
    lines = text.splitlines()
    assert "     0.1  phase virtualenv" in lines and "     3.0  phase pytest" in lines
    directory = next(line for line in lines if "(3 tests)" in line and "suite/pkg " in line)
    assert float(directory.split()[0]) >= 0.5, directory
    slowest = lines[lines.index("-- the 2 slowest tests (set-up + call + tear-down)") + 1]
    assert slowest.endswith("]") and "test_sleeps" in slowest, slowest
