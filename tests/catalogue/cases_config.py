"""Config mistakes, bad command lines and faults that the README says the engine refuses or handles:
the start of the catalogue, rebuilt from a new user's pass over the README (issue 58: 108 cases, 79
of them handled clearly). Each case is one that today's code handles as the README promises: exit
code 2 for a config error (3 for a lease another run holds, 1 for a batch refused by its rules or
gates), one line naming the key (and the file holding it, where the README says so), no stack
trace, no secret, and nothing written where the command could have written: the sink (and the
error table, for a run) read back as empty, or as they were before the command. Each case is a
distinct mistake, not one mistake under another key's name.

Most cases fail before Spark reads anything (``mode=validate``, or a refusal while the job
compiles), which keeps the module fast. A fault that needs metadata from an earlier run has two
steps: that run, then the damage and the run it refuses.

The groups follow the README: top-level keys, overrides and quoting, the job file, plugin types,
sources, converters, SQL steps, lookups, forks and gates, sinks, change data, connections,
encrypted secrets, checkpoints, commits and replays, many DAGs and fan-outs, copy jobs, flows and
the flow graph, and faults of a run (gates, leases, lost or damaged metadata, schema contracts).

Not here:
- what the pass found that today's code does not do as the README promises. Those are issue 58's
  items, and each fix adds its own case;
- cases that need a server the catalogue's runner does not start (PostgreSQL, Kafka, S3). A JDBC
  watermark column that is missing or of an unusable type is tested by
  ``tests/sources/test_jdbc_source.py::test_a_missing_or_unusable_column_is_a_config_error``, a
  Kafka source's mistakes by ``tests/sources/test_kafka_source.py::test_config_mistakes_are_clear``;
  a bad S3 location ("Bad storage is a config error") has no case yet.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.catalogue.case import TRACE_MARKERS, Case, Rows, Step, case, job_file

SOURCE = "pass"
VALIDATE = ("job=j", "mode=validate")
RUN = ("job=j",)
JOB = "{dir}/jobs/j.conf"
NEVER = (*TRACE_MARKERS, "\\tat org.apache.")
"""A stack trace, also one escaped inside a JSON log record (PySpark's ``*QueryContextLogger``). That
logger's handler keeps the ``sys.stderr`` of the case that first used it, so in this process a later
case's record lands in that first case's output: only the first case to make one is sure to fail."""

IN = 'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "%s" }\n'
COLUMNS = "id INT, name STRING, amount INT, ts TIMESTAMP, op STRING"
SRC = IN % COLUMNS
SINK = "sinks.lake { type = delta, path = lake }\n"
ROWS = '{"id": 1, "name": "a", "amount": 3, "ts": "2026-01-01 00:00:00", "op": "u"}\n'
NOTHING: Mapping[str, Rows | None] = {"lake": None}
NOTHING_RUN: Mapping[str, Rows | None] = {"lake": None, "_errors/j": None}


def job(text: str, **files: str) -> dict[str, str]:
    """``jobs/j.conf`` holding ``text``, one input file of one record, and any other ``files``."""
    return {**job_file("j", text), "in/a.json": ROWS, **files}


def named(key: str, *what: str, file: str | None = JOB) -> tuple[str, ...]:
    """What a refusal says: the key (and the file) as the engine's one line names them, and any
    fragments saying what is wrong."""
    return (f"key `{key}`", *((f"file {file}",) if file else ()), *what)


def refused(
    id: str,
    files: Mapping[str, str],
    key: str,
    *what: str,
    args: tuple[str, ...] = VALIDATE,
    file: str | None = JOB,
    env: Mapping[str, str] | None = None,
    never: tuple[str, ...] = (),
) -> Case:
    """A config error: exit 2, the key named, nothing in the sink."""
    return case(
        id, SOURCE, args, 2, named(key, *what, file=file), files=files, env=env, never=(*NEVER, *never), tables=NOTHING
    )


def job_refused(id: str, text: str, key: str, *what: str) -> Case:
    """A config error of the job file ``text`` (with the usual input)."""
    return refused(id, job(text), key, *what)


def chain_refused(id: str, steps: str, key: str, *what: str) -> Case:
    """A config error of a converter chain over the usual source and sink."""
    return job_refused(id, SRC + SINK + f"converters = [{steps}]\n", key, *what)


def sql_refused(id: str, statement: str, *what: str) -> Case:
    """A ``sql`` step the README refuses, naming ``converters[0].statement``."""
    return chain_refused(
        id, '{ type = sql, statement = """' + statement + '""" }', "job.converters[0].statement", *what
    )


def sink_refused(id: str, sink: str, key: str, *what: str, source: str = SRC) -> Case:
    """A config error of a sink over the usual source."""
    return job_refused(id, source + sink + "\n", key, *what)


def top_refused(id: str, override: str, key: str, *what: str, args: tuple[str, ...] = VALIDATE) -> Case:
    """A top-level key's bad value on the command line (checked before Spark starts)."""
    return refused(id, job(SRC + SINK), key, *what, args=(*args, override), file=None)


# -- the top-level keys (README "Top-level config") ----------------------------------------------

TOP_LEVEL = [
    top_refused("top-unknown-key", "+foo=1", "foo", "unknown key", "known keys"),
    top_refused("top-lease-ttl-not-a-number", "lease.ttl_seconds=abc", "lease.ttl_seconds", "`abc`"),
    top_refused("top-mode-unknown", "mode=dryrun", "mode", "`dryrun`", args=RUN),
    top_refused("top-lineage-url-not-http", "lineage.url=ftp://x", "lineage.url", "`ftp://x`"),
    case(
        "top-job-and-flow",
        SOURCE,
        ("flow=g/n", "mode=validate", "job=j"),
        2,
        ("key `job`", "not both"),
        files=job(SRC + SINK, **{"jobs/flows/g/n.conf": "owner = a\n"}),
        never=NEVER,
    ),
]

# -- overrides and quoting (README "Command shapes", "Quoting override values") ---------------------

OVERRIDES = [
    refused(
        "override-documented-default-bad-value",
        job(SRC + SINK),
        "job.sources.in.lookback",
        "`abc` is not a duration",
        args=(*VALIDATE, "job.sources.in.lookback=abc"),
    ),
    refused(
        "override-added-key-unknown",
        job(SRC + SINK),
        "job.sources.in.formatt",
        "did you mean `format`?",
        args=(*VALIDATE, "+job.sources.in.formatt=json"),
    ),
    case(
        "quote-comma-unquoted",
        SOURCE,
        (*VALIDATE, "job.description=a,b"),
        2,
        ("job.description=a,b", "Ambiguous"),
        files=job(SRC + SINK),
        never=NEVER,
    ),
    case(
        "quote-greater-than-unquoted",
        SOURCE,
        (*VALIDATE, "job.description=a>b"),
        2,
        "job.description=a>b",
        files=job(SRC + SINK),
        never=NEVER,
    ),
]

# -- the job file (README "Writing a job") -------------------------------------------------------

JOB_FILE = [
    job_refused("job-unknown-key", SRC + SINK + "parallelizm = 2\n", "job.parallelizm", "did you mean `parallelism`?"),
    job_refused("job-wrong-type", SRC + SINK + "parallelism = lots\n", "job.parallelism", "valid integer"),
    job_refused("job-two-sources", SRC + (IN % "id INT").replace(".in", ".b") + SINK, "job.sources", "one source"),
    refused("job-unknown-key-in-a-run", job(SRC + SINK + "sink { }\n"), "job.sink", "did you mean `sinks`?", args=RUN),
]

# -- plugin types: unknown ones get did-you-mean (STYLE "one registry per kind") -------------------

PLUGIN_TYPES = [
    job_refused(
        "type-unknown-source",
        'sources.in { type = filez, format = json, path = "{dir}/in/*.json" }\n' + SINK,
        "job.sources.in.type",
        "did you mean `files`?",
    ),
    sink_refused(
        "type-unknown-sink", "sinks.lake { type = detla, path = lake }", "job.sinks.lake.type", "did you mean `delta`?"
    ),
    chain_refused(
        "type-unknown-converter", '{ type = chek, expr = "id > 0" }', "job.converters[0].type", "did you mean `check`?"
    ),
]

# -- sources (README "Sources") ---------------------------------------------------------------------

FILES = 'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT", %s }\n'
KAFKA = 'sources.in { type = kafka, bootstrap_servers = "127.0.0.1:1", %s }\n'
JDBC = 'sources.in { type = jdbc, url = "jdbc:postgresql://127.0.0.1:1/x", %s }\n'
AVSC = "jobs/schemas/x.avsc"
SCHEMA_FILE = "{dir}/" + AVSC
FROM_AVSC = 'sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = schemas/x.avsc }\n'

SOURCES = [
    job_refused(
        "source-missing-required-key", "sources.in { type = files, format = json }\n" + SINK, "job.sources.in.path"
    ),
    job_refused(
        "source-input-path-missing",
        (IN % "id INT").replace("/in/", "/nothere/") + SINK,
        "job.sources.in.path",
        "does not exist",
    ),
    job_refused("source-ddl-schema-does-not-parse", IN % "id INTT, name" + SINK, "job.sources.in.schema", "DDL"),
    refused(
        "source-avsc-not-json",
        job(FROM_AVSC + SINK, **{AVSC: '{"type": "record", "name": "x", "fields": [{"name": "id"'}),
        "job.sources.in.schema",
        "not JSON",
        file=SCHEMA_FILE,
    ),
    refused(
        "source-backfill-from-not-a-time",
        job(FILES % "from = yesterday, to = today" + SINK),
        "job.sources.in.from",
        "`yesterday`",
        args=RUN,
    ),
    job_refused(
        "source-kafka-field-named-like-its-columns",
        KAFKA % 'topics = [a], schema = "kafka_key STRING, id INT"' + SINK,
        "job.sources.in.schema",
        "kafka_key",
    ),
    job_refused(
        "source-delta-not-a-table",
        "sources.in { type = delta, path = nowhere }\n" + SINK,
        "job.sources.in.path",
        "not a Delta table",
    ),
]

# -- converters (README "Converters", "Rules, expectations and gates") ------------------------------

CONVERTERS = [
    chain_refused(
        "converter-cast-unknown-type",
        '{ type = cast, columns { amount = "decimall(12,2)" } }',
        "job.converters[0]",
        "DECIMALL",
    ),
    chain_refused(
        "converter-check-not-boolean",
        '{ type = check, expr = "amount >> 60" }',
        "job.converters[0].expr",
        "not boolean",
    ),
    chain_refused("converter-check-unknown-column", '{ type = check, expr = "amt > 0" }', "job.converters[0]", "`amt`"),
    chain_refused(
        "converter-regex-does-not-compile",
        '{ type = regex, column = name, pattern = "[a-" }',
        "job.converters[0].pattern",
        "does not compile",
    ),
    chain_refused(
        "converter-max-rejected-not-a-threshold",
        '{ type = check, expr = "amount > 0", max_rejected = lots }',
        "job.converters[0].max_rejected",
        "'lots'",
    ),
    refused(
        "converter-inferred-schema-run-checks-columns",
        job(
            'sources.in { type = files, format = json, path = "{dir}/in/*.json" }\n'
            + SINK
            + 'converters = [{ type = check, expr = "amt > 0" }]\n'
        ),
        "job.converters[0]",
        "`amt`",
        args=RUN,
    ),
]

# -- SQL steps (README "SQL steps": what a statement may be) -----------------------------------------

SQL = [
    sql_refused("sql-does-not-parse", "SELEC * FROM input", "does not parse"),
    sql_refused("sql-unknown-column", "SELECT idd FROM input", "`idd`", "`id`"),
    sql_refused("sql-limit", "SELECT * FROM input LIMIT 10", "LIMIT"),
    sql_refused("sql-union", "SELECT * FROM input UNION ALL SELECT * FROM input", "UNION"),
    sql_refused("sql-subquery", "SELECT * FROM input WHERE id IN (SELECT id FROM input WHERE amount > 1)", "subquery"),
    sql_refused("sql-another-table", "SELECT * FROM orders", "`orders`"),
    sql_refused("sql-generator", "SELECT *, explode(array(1, 2)) AS x FROM input", "EXPLODE"),
    sql_refused(
        "sql-inner-join",
        "WITH t AS (SELECT name, count(*) AS n FROM input GROUP BY name) "
        "SELECT input.* FROM input JOIN t ON input.name = t.name",
        "LEFT JOIN",
    ),
    sql_refused(
        "sql-not-written-back-faithfully",
        "SELECT name, listagg(CAST(id AS STRING)) AS ids FROM input GROUP BY name",
        "faithfully",
    ),
]

# -- lookups (README "Lookups": mistakes are config errors before anything is read) ----------------

REFERENCE = {"wh/ref/r.json": '{"cid": 1, "label": "x"}\n'}
"""A JSON reference under the warehouse, read with a declared schema (never inferred)."""


def lookup_refused(id: str, spec: str, key: str, *what: str) -> Case:
    """A lookup step's mistake, over the reference above."""
    chain = SRC + SINK + "converters = [{ type = lookup, name = ref, " + spec + " }]\n"
    return refused(id, job(chain, **REFERENCE), key, *what)


REF = 'path = ref, format = json, schema = "cid INT, label STRING", '

LOOKUPS = [
    lookup_refused("lookup-no-table-at-path", "path = ref/none, on = [id]", "job.converters[0].path", "no Delta table"),
    lookup_refused("lookup-key-missing-in-records", REF + "on = [cid]", "job.converters[0].on", "not in the records"),
    lookup_refused(
        "lookup-brought-column-already-there",
        'path = ref, format = json, schema = "id INT, name STRING", on = [id], columns = [name]',
        "job.converters[0].prefix",
        "already have column(s) name",
    ),
    lookup_refused("lookup-condition-one-side", REF + 'on = "ref.cid > 0"', "job.converters[0].on", "does not compare"),
]

# -- forks and gates (README "Forks and sinks", "Rules, expectations and gates") --------------------

FORKS_AND_GATES = [
    job_refused("fork-not-boolean", SRC + SINK + 'forks { late = "amount >> 60" }\n', "job.forks.late", "not boolean"),
    sink_refused(
        "fork-sink-reads-a-branch-no-fork-defines",
        "sinks.lake { type = delta, path = lake, from = big }",
        "job.sinks.lake.from",
        "`big`",
    ),
    job_refused("gate-not-boolean", SRC + SINK + 'gates = ["count(*)"]\n', "job.gates[0]", "not boolean"),
    job_refused(
        "gate-not-an-aggregate", SRC + SINK + 'gates = ["count(*) > 0", "amount > 0"]\n', "job.gates[1]", "aggregate"
    ),
]

# -- sinks (README "Forks and sinks": the engine's own places are refused) --------------------------

SINKS = [
    sink_refused(
        "sink-path-in-engine-metadata",
        "sinks.lake { type = delta, path = _engine/state }",
        "job.sinks.lake.path",
        "metadata",
    ),
    sink_refused(
        "sink-path-folded-into-engine-metadata",
        'sinks.lake { type = delta, path = "x/../_engine/state" }',
        "job.sinks.lake.path",
        "metadata",
    ),
    sink_refused(
        "sink-path-through-delta-log",
        'sinks.lake { type = parquet, path = "t/_delta_log/x" }',
        "job.sinks.lake.path",
        "`_delta_log`",
    ),
    job_refused(
        "sink-error-table-in-engine-metadata",
        SRC + SINK + "errors { path = _engine/errs }\n",
        "job.errors.path",
        "metadata",
    ),
    sink_refused(
        "sink-merge-without-keys",
        "sinks.lake { type = delta, path = lake, mode = merge }",
        "job.sinks.lake",
        "needs `keys`",
    ),
    sink_refused(
        "sink-merge-key-unknown-column",
        "sinks.lake { type = delta, path = lake, mode = merge, keys = [idd] }",
        "job.sinks.lake.keys",
        "`idd`",
    ),
    sink_refused(
        "sink-partition-unknown-column",
        "sinks.lake { type = delta, path = lake, partition_by = [day] }",
        "job.sinks.lake.partition_by",
        "`day`",
    ),
]

# -- change data (README "Change data applied to a table": mistakes are exit 2 at validation) -------

CHANGES = "sinks.lake { type = delta, path = lake, mode = apply_changes, keys = [id], %s }"

CHANGE_DATA = [
    sink_refused(
        "changes-without-sequence",
        "sinks.lake { type = delta, path = lake, mode = apply_changes, keys = [id] }",
        "job.sinks.lake",
        "`sequence_by`",
    ),
    sink_refused(
        "changes-sequence-unknown-column", CHANGES % "sequence_by = lsn", "job.sinks.lake.sequence_by", "`lsn`"
    ),
    sink_refused(
        "changes-delete-when-not-a-condition",
        CHANGES % 'sequence_by = ts, delete_when = "op"',
        "job.sinks.lake.delete_when",
        "not a condition",
    ),
    sink_refused(
        "changes-column-the-mode-keeps",
        CHANGES % "sequence_by = ts, scd = 2",
        "job.sinks.lake.mode",
        "`is_current`",
        source=IN % "id INT, ts TIMESTAMP, is_current BOOLEAN",
    ),
]

# -- connections (README "Connections") ---------------------------------------------------------------

CONNECTIONS_DIR = {"ENGINE_CONNECTIONS_DIR": "{dir}/conns"}
DB = {"conns/db.yaml": "type: jdbc\nurl: jdbc:postgresql://127.0.0.1:1/x\nuser: u\npassword: pw-secret\n"}
S3 = "type: s3\nbuckets: [lake]\naccess_key: x\nsecret_key: yyyyy\n"
BY_CONNECTION = "sources.in { type = jdbc, connection = db, table = t, incremental { column = id } }\n" + SINK


def connection_refused(
    id: str,
    files: Mapping[str, str],
    key: str,
    *what: str,
    args: tuple[str, ...] = VALIDATE,
    file: str | None = JOB,
) -> Case:
    """A connection's mistake, with the connections in ``{dir}/conns``."""
    return refused(id, files, key, *what, args=args, file=file, env=CONNECTIONS_DIR, never=("pw-secret",))


CONN_FILE = "{dir}/conns/db.yaml"

CONNECTIONS = [
    connection_refused(
        "connection-unknown",
        job(BY_CONNECTION.replace("connection = db", "connection = dbb"), **DB),
        "job.sources.in.connection",
        "`dbb`",
        "known: db",
    ),
    connection_refused(
        "connection-type-unknown",
        job(BY_CONNECTION, **{"conns/db.yaml": "type: mysql\nurl: jdbc:x\n"}),
        "type",
        "`mysql`",
        file=CONN_FILE,
    ),
    connection_refused(
        "connection-key-its-kind-does-not-take",
        job(BY_CONNECTION, **{"conns/db.yaml": "type: jdbc\nurl: jdbc:postgresql://h/x\nbootstrap_servers: h:1\n"}),
        "bootstrap_servers",
        file=CONN_FILE,
    ),
    case(
        "connection-file-does-not-parse",
        SOURCE,
        VALIDATE,
        2,
        ("parse", f"file {CONN_FILE}"),
        files=job(BY_CONNECTION, **{"conns/db.yaml": "type: jdbc\nurl: [unclosed\n"}),
        env=CONNECTIONS_DIR,
        never=NEVER,
        tables=NOTHING,
    ),
    connection_refused(
        "connection-of-another-kind",
        job(FILES % "connection = db" + SINK, **DB),
        "job.sources.in.connection",
        "a `files` cannot use it",
    ),
    connection_refused(
        "connection-storage-bucket-served-twice",
        job(SRC + SINK, **{"conns/a.yaml": S3, "conns/b.yaml": S3}),
        "storage.connections",
        "`a` and `b`",
        args=(*VALIDATE, "storage.connections=[a,b]"),
        file=None,
    ),
]

# -- encrypted secrets (README "Encrypted secrets (ENC(...))") ----------------------------------------

KEY = "HbeI71SAF-d7oRkbjj0s_MXqckSCzmxfc_74PrOG7Xg="
OTHER_KEY = "cFpx2gbySDWyExXWxrOBmQECFd-9oyxVOamka95scNc="
SECRET = "hunter2-secret"
TOKEN = "gAAAAABrD2smubqLim4loHrnl7boRIVF2Y0ABYJAfhzl4WkEz8Sttdh5UKICDczIL0EMk4eyy-VW9iucaA5xg0JvbrLwmqNb6w=="
"""``SECRET`` encrypted with ``KEY`` (Fernet)."""
SHORT_TOKEN = "gAAAAABrD2zFbn2_HHsuMXWimZSsSuOPgLZ0zzlI59xq3CCea6_U0ExP2FPhWQeinZ58yfXGH9HigqIv9FyaPFpWRUh7ew4XMw=="
"""``ab`` encrypted with ``KEY``: too short to be masked."""
KEY_FILE = {"ENGINE_MASTER_KEY_FILE": "{dir}/master.key"}
WITH_PASSWORD = JDBC % 'user = u, password = "ENC(%s)", table = t, incremental { column = id }'


def secret_refused(id: str, text: str, key: str, master: str, *what: str) -> Case:
    """A refused ``ENC(...)`` value, with the master key ``master``: the value's key named, never its plaintext."""
    files = job(text, **{"master.key": master + "\n"})
    return refused(id, files, key, *what, env=KEY_FILE, never=(SECRET,))


SECRETS = [
    secret_refused(
        "secret-another-key", WITH_PASSWORD % TOKEN + SINK, "job.sources.in.password", OTHER_KEY, "cannot decrypt"
    ),
    secret_refused(
        "secret-masked-in-a-message",
        FILES % f'min_age = "ENC({TOKEN})"' + SINK,
        "job.sources.in.min_age",
        KEY,
        "`***` is not a duration",
    ),
    case(
        "secret-too-short-to-mask",
        SOURCE,
        VALIDATE,
        0,
        ("job.description", "under 4 characters"),
        files=job(SRC + SINK + f'description = "ENC({SHORT_TOKEN})"\n', **{"master.key": KEY + "\n"}),
        env=KEY_FILE,
        never=NEVER,
    ),
    case(
        "secret-plain-password-hidden-by-cfg",
        SOURCE,
        ("job=j", "--cfg", "job"),
        0,
        "password",
        files=job(JDBC % 'user = u, password = "plainpw123", table = t, incremental { column = id }' + SINK),
        never=(*NEVER, "plainpw123"),
    ),
    case(
        "secret-new-key-never-overwrites",
        SOURCE,
        ("mode=new_key",),
        2,
        ("{dir}/master.key exists", "never overwritten"),
        files={"master.key": KEY + "\n"},
        env=KEY_FILE,
        never=(*NEVER, KEY),
    ),
]

# -- checkpoints, commits and replays (README "Status and checkpoints", "Operating the commit log",
#    "Replaying rejected records") -------------------------------------------------------------------

DATASET = "checkpoint.dataset=files:{dir}/in/*.json"
CHECKPOINT = ("job=j", "mode=checkpoint")
COMMIT = ("job=j", "mode=commit")
REPLAY = ("job=j", "mode=replay")


def file_of(key: str) -> str | None:
    """The file a refusal names with ``key``: the job file for the job's keys; none asserted for a
    top-level key, which comes from the command line."""
    return JOB if key.startswith("job.") else None


def operation_refused(id: str, args: tuple[str, ...], key: str, *what: str, text: str = SRC + SINK) -> Case:
    """An operator's command that is refused before it changes anything."""
    return refused(id, job(text), key, *what, args=args, file=file_of(key))


def after_a_run(id: str, args: tuple[str, ...], key: str, *what: str) -> Case:
    """A command refused against the metadata of one successful run, which it leaves as it was."""
    refusal = Step(args, 2, named(key, *what, file=file_of(key)), never=NEVER, tables={"lake": Rows(count=1)})
    return Case(id, SOURCE, (Step(RUN, 0), refusal), files=job(SRC + SINK))


OPERATIONS = [
    operation_refused(
        "checkpoint-action-unknown", (*CHECKPOINT, "checkpoint.action=undo"), "checkpoint.action", "`undo`"
    ),
    operation_refused(
        "checkpoint-without-a-reason", (*CHECKPOINT, "checkpoint.action=reset", DATASET), "checkpoint.reason"
    ),
    after_a_run(
        "checkpoint-rewind-forward",
        (
            *CHECKPOINT,
            "checkpoint.action=rewind",
            DATASET,
            "checkpoint.value=4102444800000|{dir}/in/z.json",
            "checkpoint.reason=x",
        ),
        "checkpoint.value",
        "use `set`",
    ),
    after_a_run(
        "checkpoint-start-over-with-state",
        (*CHECKPOINT, "checkpoint.action=start_over", "checkpoint.dag=j", "checkpoint.reason=x"),
        "checkpoint.action",
        "not lost",
    ),
    operation_refused(
        "commit-release-nothing-waiting",
        (*COMMIT, "commit.action=release", "commit.reason=x"),
        "commit.dag",
        "no unfinished",
    ),
    operation_refused("replay-dag-unknown", (*REPLAY, "replay.dag=nope"), "replay.dag", "`nope`"),
    operation_refused(
        "replay-into-an-overwrite-sink",
        REPLAY,
        "job.sinks.lake.mode",
        "overwrite",
        text=SRC + "sinks.lake { type = delta, path = lake, mode = overwrite }\n",
    ),
    operation_refused(
        "replay-schema-never-pinned",
        REPLAY,
        "job.sources.in.schema",
        "none was pinned",
        text='sources.in { type = files, format = json, path = "{dir}/in/*.json" }\n' + SINK,
    ),
]

# -- many DAGs and fan-outs (README "Many JobDags in one Spark application") -------------------------

DAG = (IN % "id INT").strip() + ", sinks.lake { type = delta, path = %s }"
FAN_OUT = (
    'fan_out { %s, template { sources.in { type = files, format = json, path = "%s", schema = "id INT" }, '
    'sinks.lake { type = delta, path = "lake/{dataset}" } } }\n'
)


def dags(*dag: tuple[str, str]) -> str:
    """A ``dags`` block of ``(name, body)``."""
    return "dags {\n" + "".join(f"  {name} {{ {body} }}\n" for name, body in dag) + "}\n"


MANY_DAGS = [
    job_refused(
        "dags-after-unknown", dags(("a", DAG % "a"), ("b", "after = [c], " + DAG % "b")), "job.dags.b.after", "`c`"
    ),
    job_refused(
        "dags-cycle",
        dags(("a", "after = [b], " + DAG % "a"), ("b", "after = [a], " + DAG % "b")),
        "job.dags.a.after",
        "a -> b -> a",
    ),
    job_refused(
        "fan-out-unknown-placeholder",
        FAN_OUT % ("datasets = [a, b]", "{dir}/in/{datset}.json"),
        "job.fan_out.template.sources.in.path",
        "`{datset}`",
    ),
    job_refused(
        "fan-out-discovers-nothing",
        FAN_OUT % ('discover { type = glob, path = "{dir}/land/*" }', "{path}/*.json"),
        "job.fan_out",
        "allow_empty",
    ),
]

# -- copy jobs (README "Copy jobs": refused when the job compiles) ------------------------------------

TREE = {"src/a.txt": "hello\n", "src2/b.txt": "x\n"}
COPY = 'copy { source = "{dir}/src", target = "{dir}/out", %s }\n'


def copy_refused(id: str, text: str, key: str, *what: str) -> Case:
    """A copy job's mistake: exit 2, the key named, nothing copied."""
    step = Step(VALIDATE, 2, named(key, *what), never=NEVER)
    return Case(id, SOURCE, (step,), files={**job_file("j", text), **TREE})


COPIES = [
    copy_refused(
        "copy-target-inside-its-source",
        'copy { source = "{dir}/src", target = "{dir}/src/mirror" }\n',
        "job.copy.target",
        "overlap",
    ),
    copy_refused(
        "copy-target-in-engine-metadata",
        'copy { source = "{dir}/src", target = "{dir}/wh/_engine/m" }\n',
        "job.copy.target",
        "metadata",
    ),
    copy_refused(
        "copy-two-dags-one-target",
        'dags { a { copy { source = "{dir}/src", target = "{dir}/out" } }, '
        'b { copy { source = "{dir}/src2", target = "{dir}/out" } } }\n',
        "job.dags.b.copy.target",
        "same target",
    ),
    copy_refused(
        "copy-nested-targets-with-deletions",
        'dags { a { copy { source = "{dir}/src", target = "{dir}/out", delete.enabled = true } }, '
        'b { copy { source = "{dir}/src2", target = "{dir}/out/b" } } }\n',
        "job.dags.b.copy.target",
        "propagates deletions",
    ),
]

# -- flows, template packs and the flow graph (README "Flows") ----------------------------------------

TOPOLOGY = """
nodes {
  land { kind = folder, properties { path = "{dir}/land" } }
  lake { kind = lake, properties { path = lake } }
  far { kind = folder, properties { path = "{dir}/far" } }
}
edges {
  land_to_lake { from = land, to = lake, templates = [p/t], executors = [local], cost = 1 }
}
"""
TEMPLATE = """
parameters { required = [source.path, destination.path, datasets] }
fan_out {
  datasets = ${params.datasets}
  template {
    sources.in { type = files, format = json, path = ${params.source.path}"/{dataset}.json", schema = "id INT" }
    sinks.lake { type = delta, path = ${params.destination.path}"/{dataset}" }
  }
}
"""
FLOW = "owner = alice\nsource = land\ndestinations = [lake]\ndatasets = [a]\n"
FLOW_FILE = "{dir}/jobs/flows/g/n.conf"
TOPOLOGY_FILE = "{dir}/topo/t.conf"
FLOW_ARGS = ("flow=g/n", "mode=validate", "topology_dir={dir}/topo")


def flow_files(
    flow: str = FLOW, topology: str = TOPOLOGY, template: str = TEMPLATE, pack: bool = True
) -> dict[str, str]:
    """A flow ``g/n`` from ``land`` to ``lake`` over one edge, its template ``p/t`` and the pack allowing ``alice``."""
    files = {
        "jobs/flows/g/n.conf": flow,
        "topo/t.conf": topology,
        "jobs/templates/p/t.conf": template,
        "land/a.json": '{"id": 1}\n',
    }
    if pack:
        files["jobs/templates/p/pack.conf"] = "owners = [ops]\nprincipals = [alice]\n"
    return files


def flow_refused(
    id: str, files: Mapping[str, str], key: str, *what: str, file: str = FLOW_FILE, args: tuple[str, ...] = FLOW_ARGS
) -> Case:
    """A flow's mistake: exit 2 before any hop runs, the key and the file named, no hop's table written."""
    step = Step(args, 2, named(key, *what, file=file), never=NEVER, tables={"lake/a": None})
    return Case(id, SOURCE, (step,), files=files)


FLOWS = [
    flow_refused(
        "flow-owner-not-allowed-by-the-pack",
        flow_files(FLOW.replace("alice", "mallory")),
        "flow.owner",
        "`mallory`",
        "allowed: alice",
    ),
    flow_refused(
        "flow-required-parameter-missing",
        flow_files(FLOW.replace("datasets = [a]\n", "")),
        "flow.datasets",
        "`datasets`",
    ),
    flow_refused(
        "flow-destination-unreachable",
        flow_files(FLOW.replace("[lake]", "[far]")),
        "flow.destinations[0]",
        "cannot be reached",
    ),
    flow_refused(
        "flow-template-job-mistake",
        flow_files(template=TEMPLATE.replace("type = delta", "type = detla")),
        "hops.land_to_lake.job.fan_out.template.sinks.lake.type",
        "template `p/t`",
    ),
    flow_refused(
        "graph-edge-to-unknown-node",
        flow_files(topology=TOPOLOGY.replace("to = lake", "to = lakes")),
        "edges.land_to_lake.to",
        "did you mean `lake`?",
        file=TOPOLOGY_FILE,
    ),
    flow_refused(
        "graph-node-defined-twice",
        {**flow_files(), "topo/u.conf": 'nodes { land { kind = folder, properties { path = "{dir}/x" } } }\n'},
        "nodes.land",
        "defined twice",
        file="{dir}/topo/u.conf",
    ),
    flow_refused(
        "graph-hop-name-given-twice",
        {
            **flow_files(
                topology=TOPOLOGY.replace("[p/t]", "[p/t, p/u]")
                + "edges.land_to_lake-u { from = land, to = far, templates = [p/t], executors = [local], cost = 1 }\n"
            ),
            "jobs/templates/p/u.conf": TEMPLATE,
        },
        "edges.land_to_lake-u",
        "both give a hop named",
        file=TOPOLOGY_FILE,
    ),
]

# -- faults of a run (README "Rules, expectations and gates", "Incremental runs", "Guarantees",
#    "Lost or damaged metadata", "Schema contracts") -----------------------------------------------

TWO = '{"id": 1, "name": "a", "amount": 3}\n{"id": 2, "name": "b", "amount": -1}\n'
LATER = {"in/b.json": '{"id": 3, "name": "c", "amount": 5}\n'}
PLAIN = IN % "id INT, name STRING, amount INT"
LEASE = json.dumps(
    {"job": "j", "run_id": "20260101T000000Z-elsewhere", "host": "another-host", "pid": 4242, "pid_start": None}
    | {"user": "x", "taken": 1767225600, "expires": 4102444800}
)
"""A live lease of another host (its expiry trusted: 2100), as a run there would hold it."""


UNCOMMITTED: Mapping[str, Rows | None] = {"lake/_delta_log": None, "_errors/j": None}
"""No Delta commit of the sink's new table, and no row in the error table: what a batch refused
after its one-pass staging leaves. Its staged files may stay, unreferenced, in the table's
directory (README "Guarantees": until ``VACUUM`` or ``abandon``)."""


def batch_refused(
    id: str,
    text: str,
    *what: str,
    env: Mapping[str, str] | None = None,
    tables: Mapping[str, Rows | None] = NOTHING_RUN,
) -> Case:
    """A batch the run refuses: exit 1, why said, nothing published (not even its error-table rows)."""
    files = {**job_file("j", PLAIN + SINK + text), "in/a.json": TWO}
    return case(id, SOURCE, RUN, 1, what, files=files, env=env, never=NEVER, tables=tables)


def refused_after_a_run(id: str, damage: Callable[[Path], None], *what: str) -> Case:
    """A run refused (exit 2) after ``damage`` to the metadata of a first run: nothing of the new file published."""
    second = Step(RUN, 2, what, never=NEVER, files=LATER, before=damage, tables={"lake": Rows(count=2)})
    return Case(id, SOURCE, (Step(RUN, 0), second), files={**job_file("j", PLAIN + SINK), "in/a.json": TWO})


def removed(table: str) -> Callable[[Path], None]:
    """The warehouse's ``table`` deleted."""

    def remove(root: Path) -> None:
        shutil.rmtree(root / "wh" / table)

    return remove


def entry_not_json(table: str) -> Callable[[Path], None]:
    """A newest log entry of ``table`` that is not JSON (a write cut off by a crash)."""

    def damage(root: Path) -> None:
        log = root / "wh" / table / "_delta_log"
        version = max(int(entry.stem) for entry in log.glob("*.json")) + 1
        (log / f"{version:020d}.json").write_text("{not json\n")

    return damage


def written_by_a_newer_engine(table: str) -> Callable[[Path], None]:
    """A commit of ``table`` setting its schema version above this engine's (as a newer engine's
    first write would); delta-rs refuses to set a property it does not know, so written by hand."""

    def upgrade(root: Path) -> None:
        log = root / "wh" / table / "_delta_log"
        entries = sorted(log.glob("*.json"))
        actions = [json.loads(line) for entry in entries for line in entry.read_text().splitlines()]
        meta = [a["metaData"] for a in actions if "metaData" in a][-1]
        meta["configuration"]["engine.schema_version"] = "99"
        commit = {"commitInfo": {"operation": "SET TBLPROPERTIES"}}
        (log / f"{int(entries[-1].stem) + 1:020d}.json").write_text(
            f"{json.dumps({'metaData': meta})}\n{json.dumps(commit)}\n"
        )

    return upgrade


def contract_refused(id: str, sink: str, schema: str, row: str, *what: str) -> Case:
    """A second batch whose columns the Delta table's schema contract refuses: exit 1, the table as before."""
    second = Step(
        (*RUN, f'job.sources.in.schema="{schema}"'),
        1,
        what,
        never=NEVER,
        files={"in/b.json": row},
        tables={"lake": Rows(count=1)},
    )
    return Case(
        id,
        SOURCE,
        (Step(RUN, 0), second),
        files=job_file("j", IN % "id INT, name STRING" + sink) | {"in/a.json": '{"id": 1, "name": "a"}\n'},
    )


FAULTS = [
    batch_refused(
        "fault-gate-fails",
        'gates = ["count(*) > 5"]\n',
        "refused by quality gates",
        "`count(*) > 5`",
        "observed count(*) = 2",
    ),
    batch_refused(
        "fault-rule-over-its-max-rejected",
        'converters = [{ type = check, expr = "amount > 0", max_rejected = 0 }]\n',
        "refused by quality gates",
        "rule `check` rejected 1 of 2 records",
        tables=UNCOMMITTED,
    ),
    batch_refused("fault-injected-read-failure", "", "injected failure", env={"ENGINE_FAIL_DATASETS": "files:*"}),
    case(
        "fault-lease-held-elsewhere",
        SOURCE,
        RUN,
        3,
        ("job j is already running", "another-host", "Nothing was done"),
        files={**job(SRC + SINK), "wh/_engine/leases/j/1.json": LEASE},
        never=NEVER,
        tables=NOTHING_RUN,
    ),
    refused_after_a_run("fault-state-lost", removed("_engine/state"), "{dir}/wh/_engine/state", "missing"),
    refused_after_a_run(
        "fault-file-log-lost",
        removed("_engine/files_read"),
        "file log (_engine/files_read)",
        "Nothing was read or written",
    ),
    refused_after_a_run(
        "fault-state-log-entry-damaged", entry_not_json("_engine/state"), "{dir}/wh/_engine/state", "not valid JSON"
    ),
    refused_after_a_run(
        "fault-state-of-a-newer-engine",
        written_by_a_newer_engine("_engine/state"),
        "newer engine",
        "{dir}/wh/_engine/state",
    ),
    contract_refused(
        "fault-contract-type-does-not-fit",
        SINK,
        "id STRING, name STRING",
        '{"id": "x2", "name": "b"}\n',
        "sink `lake`",
        "column `id` is int in the table, string in the batch",
    ),
]

CASES: list[Case] = [
    *TOP_LEVEL,
    *OVERRIDES,
    *JOB_FILE,
    *PLUGIN_TYPES,
    *SOURCES,
    *CONVERTERS,
    *SQL,
    *LOOKUPS,
    *FORKS_AND_GATES,
    *SINKS,
    *CHANGE_DATA,
    *CONNECTIONS,
    *SECRETS,
    *OPERATIONS,
    *MANY_DAGS,
    *COPIES,
    *FLOWS,
    *FAULTS,
]
