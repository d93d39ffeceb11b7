"""Messages that hid the cause (issue 58, items 14-19): each case exited with a traceback, Hydra's
several lines, a raw ``[Errno 20]`` or pydantic's ``Value error, `` before it was fixed; each now
says the cause in one line naming the key or the file.

Not expressible as a command line run in this process, so tested on their own:

- item 13, Java stack traces on stderr: Spark's log goes through the JVM's log4j, which writes to
  the process's stderr directly, not to ``sys.stderr``; what a ``./spark-submit.sh`` user sees is
  checked in ``tests/e2e/test_output_hygiene.py`` by
  ``test_a_failed_task_s_stack_trace_goes_to_the_run_s_log_file_not_stderr`` and
  ``test_a_corrupt_file_skipped_leaves_stderr_clean_and_debug_shows_the_trace``;
- item 19, the README section a message points to: ``tests/test_readme_pointers.py``.
"""

from __future__ import annotations

import socket

from cryptography.fernet import Fernet

from tests.catalogue.case import TRACE_MARKERS, Case, case, job_file

RUN = ("job=j",)
FILES_JOB = """
sources.in { type = files, format = json, path = "{dir}/in/*.json", schema = "id INT" }
sinks.lake { type = delta, path = lake }
"""
JDBC_JOB = """
sources.db {{ type = jdbc, url = "{url}", table = orders, user = u, password = "pw-not-shown"
             incremental {{ column = id }} }}
sinks.lake {{ type = delta, path = lake }}
"""
SINK = "sinks.lake { type = delta, path = lake }\n"
DB = "jdbc:postgresql://db:5432/shop"
KEY = Fernet.generate_key().decode()
ANOTHER_KEYS_TOKEN = Fernet(Fernet.generate_key()).encrypt(b"pw-not-shown").decode()
HYDRA_SAYS = ("HYDRA_FULL_ERROR", "Config search path", "is not in struct", "full_key:")
"""Hydra's own report of what it refused: never shown."""


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (taken from the OS, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _jdbc(url: str) -> dict[str, str]:
    return job_file("j", JDBC_JOB.format(url=url))


CASES: list[Case] = [
    # 14: a job file that does not parse is one line with its file, line and column
    case(
        "msg-hocon-syntax-error",
        "58.14",
        RUN,
        2,
        ("config error: cannot parse HOCON at line 4, column 1: Expected '}'", "(file {dir}/jobs/j.conf)"),
        files=job_file("j", FILES_JOB.replace("path = lake }", "path = lake")),
    ),
    case(
        "msg-yaml-syntax-error",
        "58.14",
        RUN,
        2,
        ("config error: cannot parse YAML at line 3, column 4: ", "(file {dir}/jobs/j.yaml)"),
        files={"jobs/j.yaml": "sources:\n  in: {type: files\n  x: [\n"},
    ),
    # 16: a missing jobs folder, a missing job or flow, an unknown key: one line with did-you-mean
    case(
        "msg-jobs-folder-missing",
        "58.16",
        RUN,
        2,
        "config error: the jobs folder {dir}/nowhere (ENGINE_JOBS_DIR) does not exist",
        never=(*TRACE_MARKERS, *HYDRA_SAYS, "+job"),
        env={"ENGINE_JOBS_DIR": "{dir}/nowhere"},
    ),
    case(
        "msg-job-missing",
        "58.16",
        ("job=jj",),
        2,
        ("config error: no job `jj`: no jj.conf, .yaml or .yml in {dir}/jobs", "did you mean `j`?"),
        never=(*TRACE_MARKERS, *HYDRA_SAYS, "Available options"),
        files=job_file("j", FILES_JOB),
    ),
    case(
        "msg-flow-missing",
        "58.16",
        ("flow=g/copy_order",),
        2,
        ("config error: no flow `g/copy_order`:", "did you mean `g/copy_orders`?"),
        never=(*TRACE_MARKERS, *HYDRA_SAYS),
        files={"jobs/flows/g/copy_orders.conf": "flowGroup = g\nflowName = copy_orders\n"},
    ),
    case(
        "msg-unknown-key-override",
        "58.16",
        (*RUN, "job.sinks.lake.pathh=x"),
        2,
        (
            "config error: unknown key `job.sinks.lake.pathh`: did you mean `job.sinks.lake.path`?",
            '"status": "CONFIG_ERROR", "message": "unknown key `job.sinks.lake.pathh`',
        ),
        never=(*TRACE_MARKERS, *HYDRA_SAYS),
        files=job_file("j", FILES_JOB),
    ),
    # 17: an ENC(...) value names the file it is in and its key there
    case(
        "msg-enc-in-a-connection-file",
        "58.17",
        RUN,
        2,
        ("cannot decrypt this ENC(...) value", "(key `password`, file {dir}/connections/shop.yaml)"),
        never=(*TRACE_MARKERS, "jobs/j.conf", "pw-not-shown"),
        files={
            **job_file("j", "sources.db { type = jdbc, connection = shop, table = orders }\n" + SINK),
            "connections/shop.yaml": f"type: jdbc\nurl: {DB}\npassword: ENC({ANOTHER_KEYS_TOKEN})\n",
            "master.key": KEY + "\n",
        },
        env={"ENGINE_MASTER_KEY_FILE": "{dir}/master.key", "ENGINE_CONNECTIONS_DIR": "{dir}/connections"},
    ),
    case(
        "msg-enc-without-a-master-key",
        "58.17",
        RUN,
        2,
        ("ENGINE_MASTER_KEY_FILE is not set", "(key `job.sources.db.password`, file {dir}/jobs/j.conf)"),
        files=job_file(
            "j",
            'sources.db { type = jdbc, url = "jdbc:postgresql://db:5432/shop", table = orders, '
            f'password = "ENC({ANOTHER_KEYS_TOKEN})" }}\nsinks.lake {{ type = delta, path = lake }}\n',
        ),
        env={"ENGINE_MASTER_KEY_FILE": ""},
    ),
    # 18: a warehouse that is a file
    case(
        "msg-warehouse-is-a-file",
        "58.18",
        (*RUN, "warehouse={dir}/wh-file"),
        2,
        ("config error: the warehouse {dir}/wh-file is a file, not a folder", "(key `warehouse`)"),
        never=(*TRACE_MARKERS, "Errno", "Not a directory"),
        files={**job_file("j", FILES_JOB), "wh-file": "not a folder\n"},
    ),
    # 19: a validator's words without pydantic's prefix
    case(
        "msg-no-value-error-prefix",
        "58.19",
        (*RUN, "mode=validate"),
        2,
        "config error: give exactly one of `table` and `query` (key `job.sources.db`",
        never=(*TRACE_MARKERS, "Value error"),
        files=job_file(
            "j",
            'sources.db { type = jdbc, url = "jdbc:postgresql://db/shop", table = t, query = "SELECT 1" }\n'
            "sinks.lake { type = delta, path = lake }\n",
        ),
    ),
    # 15: a database that cannot be reached: the cause, exit 1 (validate says what that means)
    case(
        "msg-database-refuses-connections-validate",
        "58.15",
        (*RUN, "mode=validate"),
        1,
        (
            "error: cannot read the schema of orders (source `db`) at jdbc:postgresql://127.0.0.1:",
            ": connection refused: ",
            "(key `job.sources.db`). mode=validate stopped there: its exit code 1 says",
        ),
        never=(*TRACE_MARKERS, "jdbc:jdbc:", "pw-not-shown", "An error occurred while calling"),
        files=_jdbc(f"jdbc:postgresql://127.0.0.1:{_closed_port()}/shop"),
    ),
    case(
        "msg-database-host-unknown-run",
        "58.15",
        RUN,
        1,
        ("at jdbc:postgresql://no-such-host.invalid:5432/shop: unknown host: ", "UnknownHostException"),
        never=(*TRACE_MARKERS, "jdbc:jdbc:", "pw-not-shown", "mode=validate"),
        files=_jdbc("jdbc:postgresql://no-such-host.invalid:5432/shop"),
        tables={"lake": None},
    ),
]
