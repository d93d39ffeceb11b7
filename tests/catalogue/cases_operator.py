"""What an operator's pass found (issue 74): faults and inputs from running the engine in production
rather than writing its jobs. Each case failed before its fix: data lost or doubled without a word."""

from __future__ import annotations

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
]
