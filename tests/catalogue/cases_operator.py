"""What an operator's pass found (issue 74): faults and inputs from running the engine in production
rather than writing its jobs. Each case failed before its fix: data lost or doubled without a word."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tests.catalogue.case import TRACE_MARKERS, Case, Rows, Step, job_file

RUN = ("job=j",)
PLAIN = (
    'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT" }\n'
    "sinks.lake { type = delta, path = lake }\n"
)


def paths_logged(*names: str) -> Rows:
    """The file log holds exactly these file names (what the next runs will not read again)."""
    return Rows(
        check=lambda t: sorted(p.rsplit("/", 1)[-1] for p in t.column("path").to_pylist()) == sorted(names),
        why=f"the file log names {sorted(names)}",
    )


def modified_in(seconds: float, name: str) -> Any:
    """Set ``{dir}/<name>``'s modification time ``seconds`` from now (a writer whose clock is ahead)."""

    def set_time(root: Path) -> None:
        when = time.time() + seconds
        os.utime(root / name, (when, when))

    return set_time


CASES: list[Case] = [
    Case(  # they were logged as read while Spark's reader dropped their records: exit 0, no word
        "hidden-file-names-a-glob-matches-are-said-not-read-and-not-logged",
        "74.1",
        (
            Step(
                RUN,
                0,
                says=("sources.in.path: 2 file(s) matched but not read", "in/_b.json", "in/.c.json"),
                files={"in/a.json": '{"id": 1}\n', "in/_b.json": '{"id": 2}\n', "in/.c.json": '{"id": 3}\n'},
                tables={"lake": Rows(count=1, values={"id": [1]}), "_engine/files_read": paths_logged("a.json")},
            ),
            Step(  # renamed, it is read
                RUN,
                0,
                says=("1 file(s) matched but not read", "in/.c.json"),
                files={"in/b.json": '{"id": 2}\n'},
                before=lambda root: (root / "in" / "_b.json").unlink(),
                tables={
                    "lake": Rows(count=2, values={"id": [1, 2]}),
                    "_engine/files_read": paths_logged("a.json", "b.json"),
                },
            ),
        ),
        files=job_file("j", PLAIN),
    ),
    Case(  # what writers leave beside their data is skipped without a word
        "commit-markers-and-checksums-a-glob-matches-are-skipped-quietly",
        "74.1",
        (
            Step(
                RUN,
                0,
                never=(*TRACE_MARKERS, "matched but not read"),
                files={"in/a.json": '{"id": 1}\n', "in/_SUCCESS": "", "in/.a.json.crc": "crc"},
                tables={"lake": Rows(count=1), "_engine/files_read": paths_logged("a.json")},
            ),
        ),
        files=job_file("j", PLAIN.replace("in/*.json", "in/*")),
    ),
    Case(  # it was skipped without a word until the clock passed its time
        "a-file-modified-in-the-future-is-said-and-read-once-its-time-has-passed",
        "74.5",
        (
            Step(
                RUN,
                0,
                says=("sources.in.path: 1 file(s) modified in the future", "in/b.json"),
                files={"in/a.json": '{"id": 1}\n', "in/b.json": '{"id": 2}\n'},
                before=modified_in(86_400, "in/b.json"),
                tables={"lake": Rows(count=1, values={"id": [1]}), "_engine/files_read": paths_logged("a.json")},
            ),
            Step(  # its writer's clock set right: it is read
                RUN,
                0,
                never=(*TRACE_MARKERS, "modified in the future"),
                before=modified_in(0, "in/b.json"),
                tables={"lake": Rows(count=2, values={"id": [1, 2]})},
            ),
        ),
        files=job_file("j", PLAIN),
    ),
]
