"""Where the test command's time goes (a pytest plugin: tests/conftest.py lists it in ``pytest_plugins``).

Every test's set-up, call and tear-down are recorded as pytest reports them (with pytest-xdist, the
controller receives every worker's reports, so one file holds the whole run) and written, when the
session ends, to ``.cache/test-timing/tests.json``. ``scripts/test.sh`` times its own phases (the
virtualenv, JVM packages, PostgreSQL, Kafka, Chromium, the lints, the docs build, the class archive,
pytest) into ``.cache/test-timing/phases.tsv`` and then runs ``python -m tests.timing``, which joins
both into ``.cache/test-timing/report.txt`` and prints its top lines: the phases, the sum per
directory and per file, and the slowest tests with their three parts.

A session-scoped fixture's start (PostgreSQL, Kafka, the S3 server, Spark itself) is charged to the
set-up of the first test that asks for it, as pytest measures it: the report shows it there.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("ENGINE_TEST_TIMING", REPO / ".cache" / "test-timing"))
"""Where the report goes (``ENGINE_TEST_TIMING`` moves it)."""

_durations: dict[str, dict[str, float]] = defaultdict(dict)
_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid][report.when] = round(report.duration, 3)
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput") or not _durations:  # an xdist worker: the controller writes
        return
    OUT.mkdir(parents=True, exist_ok=True)
    tests = [
        {"test": nodeid, "outcome": _outcomes.get(nodeid, "passed"), **parts} for nodeid, parts in _durations.items()
    ]
    workers = getattr(session.config.option, "numprocesses", None) or 0
    (OUT / "tests.json").write_text(json.dumps({"workers": workers, "tests": tests}, indent=0))


# -- the report ---------------------------------------------------------------------------------


def _total(row: dict[str, Any]) -> float:
    return float(row.get("setup", 0) + row.get("call", 0) + row.get("teardown", 0))


def _phases(path: Path) -> list[tuple[str, float]]:
    if not path.exists():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines() if "\t" in line]
    return [(name, float(seconds)) for name, seconds in rows]


def _sums(tests: list[dict[str, Any]], key: Any) -> list[tuple[str, float, int]]:
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for row in tests:
        seconds[key(row["test"])] += _total(row)
        counts[key(row["test"])] += 1
    return sorted(((k, s, counts[k]) for k, s in seconds.items()), key=lambda r: -r[1])


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _directory(nodeid: str) -> str:
    return str(Path(_file(nodeid)).parent)


def report(out: Path = OUT, top: int = 40) -> str:
    """The report's text: phases, directories, files (the ``top`` costliest) and the ``top`` slowest tests."""
    data = json.loads((out / "tests.json").read_text()) if (out / "tests.json").exists() else {"tests": []}
    tests: list[dict[str, Any]] = data["tests"]
    summed = sum(_total(t) for t in tests)
    lines = ["== where the test command's time went (seconds)"]
    for name, seconds in _phases(out / "phases.tsv"):
        lines.append(f"{seconds:8.1f}  phase {name}")
    lines.append(f"{summed:8.1f}  summed over {len(tests)} tests ({data.get('workers') or 1} worker(s))")
    lines.append("-- per directory")
    lines += [f"{s:8.1f}  {k} ({n} tests)" for k, s, n in _sums(tests, _directory)]
    lines.append(f"-- per file (the {top} costliest)")
    lines += [f"{s:8.1f}  {k} ({n} tests)" for k, s, n in _sums(tests, _file)[:top]]
    lines.append(f"-- the {top} slowest tests (set-up + call + tear-down)")
    for row in sorted(tests, key=_total, reverse=True)[:top]:
        parts = "/".join(f"{row.get(w, 0):.1f}" for w in ("setup", "call", "teardown"))
        lines.append(f"{_total(row):8.1f}  {row['test']} [{parts}]")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """``python -m tests.timing [N]``: write report.txt and print its first ``N`` lines (default 60)."""
    text = report()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.txt").write_text(text)
    head = int(argv[0]) if argv else 60
    print("\n".join(text.splitlines()[:head]))
    print(f"(the whole report: {OUT / 'report.txt'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
