"""Data published twice or into the wrong place (issue 58, items 1-5): each of these exited 0 and
said nothing before it was fixed."""

from __future__ import annotations

import gzip

from tests.catalogue.case import TRACE_MARKERS, Case, Rows, Step, case, job_file

RUN = ("job=j",)
PLAIN = (
    'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT" }\n'
    "sinks.lake { type = delta, path = lake }\n"
)


def reasons_said(text: str, count: int = 1) -> Rows:
    """``count`` rejected records, each with a reason holding ``text``."""
    return Rows(count=count, check=reasons_say(text).check, why=f"a reason says {text!r}")


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

CSV = """
sources.in { type = files, format = csv, path = "{dir}/in/*.csv", options { header = true } %s }
sinks.lake { type = delta, path = lake }
"""
CSV_READ_BY_NAME = Rows(
    count=3,
    check=lambda t: (
        sorted(zip(*(t.column(c).to_pylist() for c in ("id", "name", "city")), strict=True))
        == [(1, "alice", "paris"), (2, "bob", "rome"), (3, "carol", "berlin")]
    ),
    why="each value in its own column",
)

CASES: list[Case] = [
    case(
        "merge-new-table-key-twice",
        "58.1",
        RUN,
        0,
        files={
            **job_file("j", MERGE),
            "in/a.json": (
                '{"id": 1, "name": "a", "v": 1}\n{"id": 1, "name": "b", "v": 2}\n{"id": 2, "name": "c", "v": 3}\n'
            ),
        },
        tables={
            "lake": Rows(count=1, unique=("id",), values={"id": [2]}),
            "_errors/j": Rows(
                count=2,
                check=reasons_say(
                    "sink `lake`: key (id) = (1) has 2 records in this batch that are not all alike"
                ).check,
            ),
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
    *[
        Case(
            f"csv-header-in-another-order-{origin}",
            "58.2",
            (
                Step(RUN, 0, files={"in/a.csv": "id,name,city\n1,alice,paris\n2,bob,rome\n"}),
                Step(RUN, 0, files={"in/b.csv": "id,city,name\n3,berlin,carol\n"}, tables={"lake": CSV_READ_BY_NAME}),
            ),
            files=job_file("j", CSV % schema),
        )
        for origin, schema in (("inferred", ""), ("declared", ', schema = "id INT, name STRING, city STRING"'))
    ],
    case(  # the headers were read from the compressed bytes: every record rejected
        "csv-gz-files-headers-in-another-order-read-by-name",
        "58.2",
        RUN,
        0,
        files={
            **job_file("j", CSV.replace("*.csv", "*.csv.gz") % ', schema = "id INT, name STRING, city STRING"'),
            "in/a.csv.gz": gzip.compress(b"id,name,city\n1,alice,paris\n2,bob,rome\n", mtime=0),
            "in/b.csv.gz": gzip.compress(b"id,city,name\n3,berlin,carol\n", mtime=0),
        },
        tables={"lake": CSV_READ_BY_NAME},
    ),
    case(
        "refused-first-batch-leaves-no-file-in-the-sink-folder",
        "pass",
        RUN,
        1,
        ("refused by quality gates", '"records_read": 2'),
        files={
            **job_file(
                "j",
                """
sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, v INT" }
converters = [{ type = check, expr = "v > 0", reason = "v must be positive", max_rejected = 0 }]
sinks.lake { type = delta, path = lake }
""",
            ),
            "in/a.json": '{"id": 1, "v": 1}\n{"id": 2, "v": -1}\n',
        },
        tables={"lake": None, "_errors/j": None},
    ),
    case(
        "changes-sequence-not-orderable",
        "pass",
        ("job=j", "mode=validate"),
        2,
        ("key `job.sinks.lake.sequence_by`", "which does not order events"),
        files=job_file(
            "j",
            """
sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, m MAP<STRING, INT>" }
sinks.lake { type = delta, path = lake, mode = apply_changes, keys = [id], sequence_by = m }
""",
        )
        | {"in/a.json": '{"id": 1, "m": {"a": 1}}\n'},
        tables={"lake": None},
    ),
    case(
        "merge-on-a-map-key",
        "pass",
        ("job=j", "mode=validate"),
        2,
        ("key `job.sinks.lake.keys`", "cannot identify a row"),
        files=job_file(
            "j",
            """
sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, m MAP<STRING, INT>" }
sinks.lake { type = delta, path = lake, mode = merge, keys = [m] }
""",
        )
        | {"in/a.json": '{"id": 1, "m": {"a": 1}}\n'},
        tables={"lake": None},
    ),
    *[
        case(
            f"two-sinks-one-place-{id}",
            "58.3",
            ("job=j", "mode=validate"),
            2,
            ("key `job.sinks.b.path`", "sink `a` (key `job.sinks.a.path`", "write the same place"),
            files=job_file(
                "j",
                'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT" }\n'
                f"sinks {{ a {{ type = delta, path = x }}, b {{ type = {kind}, path = {{dir}}/wh/{spelled} }} }}\n",
            )
            | {"in/a.json": '{"id": 1}\n'},
            tables={"x": None},
        )
        for id, kind, spelled in (("delta-x-and-x-slash", "delta", "x/"), ("delta-and-parquet", "parquet", "./x"))
    ],
    Case(
        "two-jobs-one-table",
        "58.3",
        (
            Step(("job=j",), 0, tables={"orders": Rows(count=1)}),
            Step(
                ("job=k",),
                2,
                ("key `job.sinks.lake.path`", "which job `j` writes", "set `shared = true` on both"),
                tables={"orders": Rows(count=1)},
            ),
        ),
        files={
            **{
                f"jobs/{name}.conf": 'sources.in { type = files, format = json, path = "{dir}/in/*.json", '
                'schema = "id INT" }\nsinks.lake { type = delta, path = orders }\n'
                for name in ("j", "k")
            },
            "in/a.json": '{"id": 1}\n',
        },
    ),
    Case(
        "a-job-writing-inside-another-jobs-table",
        "58.3",
        (
            Step(("job=j",), 0, tables={"orders": Rows(count=1)}),
            Step(("job=k",), 2, ("`job.sinks.lake.path`", "inside", "which job `j` writes"), absent=("wh/orders/eu",)),
        ),
        files={
            **{
                f"jobs/{name}.conf": 'sources.in { type = files, format = json, path = "{dir}/in/*.json", '
                f'schema = "id INT" }}\nsinks.lake {{ type = delta, path = {place} }}\n'
                for name, place in (("j", "orders"), ("k", "orders/eu"))
            },
            "in/a.json": '{"id": 1}\n',
        },
    ),
    Case(
        "a-file-appended-to-is-not-read-again-whole",
        "58.4",
        (
            Step(RUN, 0, files={"in/log.json": "".join(f'{{"id": {i}}}\n' for i in range(1, 11))}),
            Step(
                RUN,
                0,
                ("only they are read",),
                append={"in/log.json": "".join(f'{{"id": {i}}}\n' for i in range(11, 16))},
                tables={"lake": Rows(count=15, unique=("id",))},
            ),
        ),
        files=job_file(
            "j",
            'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT" }\n'
            "sinks.lake { type = delta, path = lake }\n",
        ),
    ),
    Case(
        "a-file-rewritten-in-place-with-more-lines-is-read-whole-when-asked",
        "58.4",
        (
            Step(RUN, 0, files={"in/daily.json": '{"id": 1}\n{"id": 2}\n'}),
            Step(  # its first lines changed, the old size still ending a line: by size alone an append
                RUN,
                0,
                ("changed_files = whole", "read again whole"),
                files={"in/daily.json": '{"id": 7}\n{"id": 8}\n{"id": 9}\n'},
                tables={"lake": Rows(count=5, values={"id": [1, 2, 7, 8, 9]})},
            ),
        ),
        files=job_file(
            "j",
            'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT", '
            "changed_files = whole }\nsinks.lake { type = delta, path = lake }\n",
        ),
    ),
    case(
        "bytes-not-utf8-in-a-rejected-record",
        "58.5",
        RUN,
        0,
        files={
            **job_file(
                "j",
                'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, name STRING" }\n'
                "sinks.lake { type = delta, path = lake }\n",
            ),
            "in/a.json": b'{"id": 1, "name": "ok"}\n{"id": 2, "name": "Zo\xeb"}\n',
        },
        tables={
            "lake": Rows(count=1),
            "_errors/j": Rows(
                count=1,
                check=lambda t: (
                    t.column("record_bytes").to_pylist() == [b'{"id": 2, "name": "Zo\xeb"}']
                    and "not UTF-8" in t.column("reasons").to_pylist()[0][0]
                ),
                why="the bytes kept apart, the text readable, the true reason",
            ),
        },
    ),
    Case(
        "checkpoint-reset-of-a-dataset-the-job-does-not-have",
        "58.8",
        (
            Step(RUN, 0),
            Step(
                (
                    *RUN,
                    "mode=checkpoint",
                    "checkpoint.action=reset",
                    "checkpoint.dataset=files:/nope",
                    "checkpoint.reason=x",
                ),
                2,
                ("key `checkpoint.dataset`", "has no dataset `files:/nope`", "its datasets: files:{dir}/in/*.json"),
                tables={"lake": Rows(count=1), "_engine/checkpoint_changes": None},
            ),
        ),
        files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
    ),
    case(
        "checkpoint-set-of-a-dataset-the-source-names-before-any-run",
        "58.8",
        (
            *RUN,
            "mode=checkpoint",
            "checkpoint.action=set",
            "checkpoint.dataset=files:{dir}/in/*.json",
            "checkpoint.kind=file",
            "checkpoint.value=1700000000000|{dir}/in/a.json",
            "checkpoint.reason=start",
        ),
        0,
        '"status": "CHANGED"',
        files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
    ),
    *[
        case(
            f"refused-{mode}-{what}-writes-nothing",
            "pass",
            (*RUN, f"mode={mode}", *args),
            2,
            key,
            files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
            absent=("wh/_engine",),
        )
        for mode, what, args, key in (
            ("checkpoint", "unknown-action", ("checkpoint.action=undo",), "key `checkpoint.action`"),
            (
                "checkpoint",
                "unknown-dataset",
                ("checkpoint.action=reset", "checkpoint.dataset=files:/x", "checkpoint.reason=r"),
                "no dataset",
            ),
            (
                "checkpoint",
                "no-reason",
                ("checkpoint.action=reset", "checkpoint.dataset=files:/x"),
                "key `checkpoint.reason`",
            ),
            ("commit", "unknown-action", ("commit.action=retry",), "key `commit.action`"),
            ("commit", "nothing-waiting", ("commit.action=release", "commit.reason=r"), "commit"),
        )
    ],
    case(
        "a-json-array-file-read-as-json-lines",
        "58.19",
        RUN,
        0,
        files={
            **job_file("j", PLAIN),
            "in/a.json": '[\n  {\n    "id": 1\n  },\n  {\n    "id": 2\n  }\n]\n',
        },
        tables={
            "lake": None,
            "_errors/j": Rows(
                count=8,
                check=lambda t: all("options.multiLine = true" in r[0] for r in t.column("reasons").to_pylist()),
                why="each line's reason says the file is one JSON document",
            ),
        },
    ),
    case(
        "backfill-bound-not-a-time-in-validate",
        "pass",
        ("job=j", "mode=validate", "job.sources.in.from=yesterday"),
        2,
        ("key `job.sources.in.from`", "`yesterday` is not a timestamp"),
        files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
        absent=("wh/_engine",),
    ),
    case(
        "drop-of-a-column-the-records-lack",
        "pass",
        ("job=j", "mode=validate"),
        2,
        ("key `job.converters[0].columns`", "drops `nam`, which the records do not have", "did you mean `name`?"),
        files={
            **job_file(
                "j",
                'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT, name STRING" }\n'
                "converters = [{ type = drop, columns = [nam] }]\nsinks.lake { type = delta, path = lake }\n",
            ),
            "in/a.json": '{"id": 1}\n',
        },
        absent=("wh/_engine",),
    ),
    case(
        "copy-job-with-a-missing-source",
        "pass",
        ("job=j",),
        2,
        ("key `job.copy.source`", "does not exist"),
        files=job_file("j", 'copy { source = "{dir}/nosrc", target = "{dir}/out" }\n'),
        absent=("out",),
    ),
    case(
        "debug-that-is-not-a-boolean",
        "pass",
        ("job=j", "mode=validate", "debug=loud"),
        2,
        ("key `debug`",),
        files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
    ),
    case(
        "hop-given-to-a-job",
        "pass",
        ("job=j", "mode=validate", "hop=x"),
        2,
        ("key `hop`", "is for a flow"),
        files={**job_file("j", PLAIN), "in/a.json": '{"id": 1}\n'},
    ),
    case(
        "engine-columns-are-not-suggested",
        "pass",
        ("job=j", "mode=validate"),
        2,
        ("key `job.converters[0]", "cannot be resolved"),
        never=(*TRACE_MARKERS, "__engine_"),
        files={
            **job_file(
                "j",
                PLAIN.replace("sinks.lake", 'converters = [{ type = check, expr = "nope > 0" }]\nsinks.lake'),
            ),
            "in/a.json": '{"id": 1}\n',
        },
    ),
    Case(
        "a-publish-the-table-refuses-is-not-retried",
        "58.6",
        (
            Step(RUN, 0, files={"in/a.json": '{"id": 1, "name": "a", "v": 5}\n'}),
            Step(
                RUN,
                1,
                (
                    "running it again would fail the same way, so it is quarantined (not retried)",
                    "commit.action=release",
                ),
                files={"in/b.json": '{"id": 2, "name": "b", "v": -1}\n'},
                before=lambda root: _constrain(root / "wh" / "lake", "v > 0"),
                tables={"lake": Rows(count=1)},
            ),
            Step(RUN, 1, ('"status": "QUARANTINED"', "no retry can mend"), tables={"lake": Rows(count=1)}),
        ),
        files=job_file("j", MERGE),
    ),
    case(
        "csv-header-lacking-a-column-of-the-declared-schema",
        "pass",
        RUN,
        0,
        files={
            **job_file("j", CSV % ', schema = "id INT, name STRING, city STRING"'),
            "in/a.csv": "Order ID,Name,City\n1,alice,paris\n",
        },
        tables={"lake": None, "_errors/j": reasons_said("has no column(s) `id` of the schema")},
    ),
]


def _constrain(table: object, check: str) -> None:
    """A CHECK constraint added to a Delta table (as its owners might, between two runs)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    assert session is not None
    session.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT guarded CHECK ({check})")
