"""Data published twice or into the wrong place (issue 58, items 1-5): each of these exited 0 and
said nothing before it was fixed."""

from __future__ import annotations

from tests.catalogue.case import Case, Rows, Step, case, job_file

RUN = ("job=j",)


def reasons_say(text: str) -> Rows:
    """Every rejected record of the error table gives a reason holding ``text``."""
    return Rows(
        check=lambda t: all(any(text in r for r in rs) for rs in t.column("reasons").to_pylist()),
        why=f"a reason says {text!r}",
    )

MERGE = """
sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, name STRING, v INT" }
sinks.lake { type = delta, path = lake, mode = merge, keys = [id] }
"""

CASES: list[Case] = [
    case(
        "merge-new-table-key-twice",
        "58.1",
        RUN,
        0,
        files={
            **job_file("j", MERGE),
            "in/a.json": '{"id": 1, "name": "a", "v": 1}\n{"id": 1, "name": "b", "v": 2}\n{"id": 2, "name": "c", "v": 3}\n',
        },
        tables={
            "lake": Rows(count=1, unique=("id",), values={"id": [2]}),
            "_errors/j": Rows(count=2, check=reasons_say("sink `lake`: key (id) = (1) has 2 different").check),
        },
    ),
    Case(
        "merge-existing-table-new-key-twice",
        "58.1",
        (
            Step(RUN, 0, files={"in/a.json": '{"id": 1, "name": "a", "v": 1}\n'}),
            Step(
                RUN,
                0,
                files={"in/b.json": '{"id": 5, "name": "x", "v": 1}\n{"id": 5, "name": "y", "v": 2}\n'},
                tables={
                    "lake": Rows(count=1, unique=("id",)),
                    "_errors/j": Rows(count=2, check=reasons_say("key (id) = (5)").check),
                },
            ),
        ),
        files=job_file("j", MERGE),
    ),
]
