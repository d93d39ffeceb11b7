"""The command line of ``./spark-submit.sh`` as a user runs it; outputs checked with delta-rs/pyarrow.

Most tests run the command line through ``main()`` in this process, on the test session's Spark
(:func:`here`): its exit code, its messages and its summary are the driver's, which Python writes.
Three stay whole commands (marked ``e2e``), each saying why only a real process shows what it
checks: output hygiene of the process, the shell's and spark-submit's argument splitting, and the
JVM's start options (the class archive)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT


def submit(
    *args: str, timeout: int = 600, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    last = proc.stdout.strip().splitlines()[-1]
    parsed = json.loads(last)
    assert isinstance(parsed, dict)
    return parsed


def here(*args: str) -> tuple[int, dict[str, Any], str, str]:
    """The command line ``./spark-submit.sh <args>`` runs (jobs from the repository's ``jobs/``),
    through ``main()`` in this process on the test session's Spark: its exit code, its last stdout
    line parsed (``{}`` when that is not JSON: ``--cfg`` prints YAML), its stdout and its stderr.
    ``main()`` rather than ``run_cli``: a refusal while composing (an unknown override key) prints
    its CONFIG_ERROR summary there only. ``progress=off`` is appended, as ``run_cli`` does."""
    import contextlib
    import io
    import logging

    from pyspark.sql import SparkSession

    from engine.cli.app import main

    session = SparkSession.getActiveSession()
    shuffle = session.conf.get("spark.sql.shuffle.partitions") if session else None
    saved = os.environ.get("ENGINE_JOBS_DIR")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # a run configures logging (debug=true: DEBUG)
    os.environ["ENGINE_JOBS_DIR"] = str(REPO / "jobs")
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([*args, "progress=off"])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    finally:
        if session is not None and shuffle is not None:  # the engine's Spark profile sets its own
            session.conf.set("spark.sql.shuffle.partitions", shuffle)
        if saved is None:
            os.environ.pop("ENGINE_JOBS_DIR", None)
        else:
            os.environ["ENGINE_JOBS_DIR"] = saved
        root.handlers[:] = handlers
        root.setLevel(level)
    assert code is not None, "main() returned without exiting"
    lines = out.getvalue().strip().splitlines()
    last = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return code, last, out.getvalue(), err.getvalue()


def rows(path: Path) -> list[dict[str, object]]:
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


@pytest.mark.e2e
def test_demo_job_end_to_end(tmp_path: Path) -> None:
    """A whole command, for the output hygiene of a real process: the caller's directory left
    empty (no ``spark-warehouse/`` or ``derby.log``, which the JVM makes relative to its working
    directory), stdout only the end table and the summary while the logs go to stderr (log4j
    writes to fd 2 itself), one progress line per phase when not on a terminal. In this process
    only Python's writes are captured, and ``progress=off`` prints no table."""
    wh, cwd = tmp_path / "wh", tmp_path / "elsewhere"
    cwd.mkdir()
    proc = submit("job=demo/orders", f"warehouse={wh}", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(cwd.iterdir()) == [], "nothing in the caller's directory (no spark-warehouse/, derby.log)"
    s = summary(proc)
    assert s["status"] == "SUCCEEDED"
    assert s["sinks"] == {"orders.lake": 40, "orders.big_orders": 15}
    assert (s["records_read"], s["errors"]) == (48, 7)
    output = proc.stdout + proc.stderr  # not a terminal: one log line per change of phase
    assert output.count("dag orders: running") == 1, output[-3000:]
    assert output.count("dag orders: publishing") == 1
    assert len(proc.stdout.strip().splitlines()) == 6, "stdout: the table and the summary, logs on stderr"
    assert "dag orders: running" in proc.stderr and "INFO" not in proc.stdout
    table = proc.stdout.strip().splitlines()[-6:-1]  # the end table (two sinks: a row each), then the JSON
    assert table[0].split()[:5] == ["dag", "status", "read", "rejected", "written"]
    assert table[2].split()[:4] == ["orders", "SUCCEEDED", "48", "7"]
    assert [r.split() for r in table[3:]] == [["lake", "40"], ["big_orders", "15"]]

    orders = rows(wh / "orders")
    ids = [r["order_id"] for r in orders]
    assert sorted(ids) == list(range(1, 41))  # every good order once, the duplicate of 3 removed
    latest_3 = next(r for r in orders if r["order_id"] == 3)
    assert latest_3["amount"] == Decimal("99.99")
    assert {p.name for p in (wh / "orders").iterdir() if p.is_dir() and p.name != "_delta_log"} == {
        f"order_date=2026-11-0{d}" for d in range(1, 6)
    }
    big = pq.read_table(wh / "extracts" / "big_orders")
    assert all(a >= 500 for a in big.column("amount").to_pylist())
    assert big.num_rows == sum(1 for r in orders if r["amount"] >= 500)

    errors = rows(wh / "_errors" / "orders")
    steps = sorted(e["step"] for e in errors)
    assert steps == sorted(["read", "read", "require", "cast", "non_negative_amount", "regex", "parse_timestamp"])
    by_step = {e["step"]: e for e in errors}
    assert json.loads(by_step["cast"]["record"])["amount"] == "twelve"
    assert by_step["non_negative_amount"]["reasons"] == ["non_negative_amount: negative amount"]
    assert {(e["job"], e["dag"], e["run_id"], e["source"]) for e in errors} == {
        ("orders", "orders", s["run_id"], "orders")
    }
    assert all(e["error_time"] is not None for e in errors)

    (run,) = [r for r in rows(wh / "_engine" / "runs") if r["status"] == "SUCCEEDED"]
    assert (run["run_id"], run["records_read"], run["records_rejected"], run["records_written"]) == (
        s["run_id"],
        48,
        7,
        55,
    )


def test_yaml_job_and_validate_mode(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    code, said, _, err = here("job=demo/customers", f"warehouse={wh}", "mode=validate")
    assert code == 0, err[-3000:]
    assert said["status"] == "VALID"
    assert not wh.exists()

    code, _, _, err = here("job=demo/customers", f"warehouse={wh}")
    assert code == 0, err[-3000:]
    assert sorted(r["customer_id"] for r in rows(wh / "customers")) == ["c000", "c001", "c003", "c005"]
    assert sorted(e["step"] for e in rows(wh / "_errors" / "customers")) == ["cast", "cast", "require"]


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        pytest.param(
            'job.converters.3.expr="amount >= AND 0"',
            "converter `non_negative_amount`: [PARSE_SYNTAX_ERROR]",
            id="sql-does-not-parse",
        ),
        pytest.param("job.sources.orders.path=/nonexistent/in/*.json", "input path does not exist", id="missing-input"),
        pytest.param("job.sinks.lake.type=delat", "did you mean `delta`?", id="unknown-plugin"),
        pytest.param("job.sinks.lake.from=vaild", "which no fork defines", id="from-no-branch"),
        pytest.param("job.sinks.lak.path=x", "lak", id="unknown-override-key"),
        pytest.param(
            "job.forks.big_orders=amount",
            "branch `big_orders`: `amount` is of type decimal(12,2), not boolean",
            id="fork-not-boolean",
        ),
    ],
)
def test_config_errors_exit_2_with_one_message_and_nothing_written(
    spark: Any, tmp_path: Path, override: str, needle: str
) -> None:
    wh = tmp_path / "wh"
    code, said, out, err = here("job=demo/orders", f"warehouse={wh}", override)
    output = out + err
    assert code == 2, output[-3000:]
    assert needle in output
    assert "Traceback" not in output  # a Python traceback: Python writes it, captured here
    assert said["status"] == "CONFIG_ERROR"
    assert not wh.exists() or list(wh.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "key", "said"),
    [
        pytest.param(
            ["mode=validate", "job.sources.orders.schema='order_id BIGINTT, v'"],
            "job.sources.orders.schema",
            "is not a Spark DDL list of columns (`name TYPE, ...`): [PARSE_SYNTAX_ERROR]",
            id="validate-ddl",
        ),
        pytest.param(
            ["job.converters.4.pattern='[a-z'"],
            "job.converters[4].pattern",
            "the regular expression '[a-z' does not compile",
            id="run-regex",
        ),
    ],
)
def test_what_would_only_fail_on_the_executors_is_exit_2_naming_the_key(
    spark: Any, tmp_path: Path, args: list[str], key: str, said: str
) -> None:
    """A schema Spark's parser refuses and a regex that does not compile were job failures (exit 1,
    no key); both are config errors naming the key and the file, before anything is written."""
    wh = tmp_path / "wh"
    code, last, out, err = here("job=demo/orders", f"warehouse={wh}", *args)
    output = out + err
    assert code == 2, output[-3000:]
    message = str(last["message"])
    assert said in message
    assert f"key `{key}`" in message and "jobs/demo/orders.conf" in message
    assert "Traceback" not in output
    assert not wh.exists() or list(wh.iterdir()) == []


def test_debug_shows_the_traceback(spark: Any, tmp_path: Path) -> None:
    code, _, out, err = here("job=demo/orders", f"warehouse={tmp_path}", "job.sinks.lake.type=delat", "debug=true")
    assert code == 2
    assert "Traceback" in out + err


def test_cfg_job_through_spark_submit() -> None:
    """``--cfg job`` through the command line's ``main()``; that the wrapper passes it on to the
    driver is the README quoting test's (a whole command, ``--cfg job`` too)."""
    code, _, out, err = here("job=demo/orders", "--cfg", "job")
    assert code == 0, err[-2000:]
    assert "format: json" in out
    assert "hydra:" not in out


def test_status_checkpoint_and_an_idle_rerun_through_spark_submit(spark: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    code, _, _, err = here("job=demo/orders", f"warehouse={wh}")
    assert code == 0, err[-3000:]
    code, again, _, err = here("job=demo/orders", f"warehouse={wh}")  # nothing new: nothing read, nothing written
    assert code == 0, err[-3000:]
    assert (again["records_read"], again["sinks"]) == (0, {})
    assert sorted(r["order_id"] for r in rows(wh / "orders")) == list(range(1, 41))

    code, report, status_out, err = here("job=demo/orders", f"warehouse={wh}", "mode=status")
    assert code == 0, err[-3000:]
    ((dataset, mark),) = [(d["dataset"], d["watermark"]) for d in report["datasets"]]
    assert dataset.startswith("files:") and mark["path"].endswith(".json")
    assert "== datasets (current watermarks)" in status_out

    code, _, out, err = here(
        "job=demo/orders",
        f"warehouse={wh}",
        "mode=checkpoint",
        "checkpoint.action=reset",
        f"checkpoint.dataset={dataset}",
    )
    assert code == 2 and "checkpoint.reason" in out + err
    code, reset, _, err = here(
        "job=demo/orders",
        f"warehouse={wh}",
        "mode=checkpoint",
        "checkpoint.action=reset",
        f"checkpoint.dataset={dataset}",
        "checkpoint.reason=replay for the e2e test",
    )
    assert code == 0, err[-3000:]
    assert reset["status"] == "CHANGED"
    changes = rows(wh / "_engine" / "checkpoint_changes")
    assert [(c["action"], c["dataset"], c["new"], c["reason"]) for c in changes] == [
        ("reset", dataset, None, "replay for the e2e test")
    ]
    assert changes[0]["old"] is not None and changes[0]["user"]


QUOTED = {
    "checkpoint.reason": "replay after bad deploy",
    "commit.reason": "released by hand, INC-42",
    "job.description": "orders, returns and refunds",
    "job.converters.3.expr": "amount >= 0 AND size(items) > 0",
    "job.converters.3.reason": "can't be negative, see INC-42",
    "job.sources.orders.path": "/data/in/2026-*/*.json",
    "checkpoint.dataset": "files:/data/in/*.json",
    "checkpoint.value": "1700000000000|/data/in/a.json",
}
"""What each override of the README's *Quoting override values* block must arrive as."""


def readme_overrides() -> list[str]:
    """The overrides of the README's quoting examples, as the shell passes them on."""
    text = (REPO / "README.md").read_text()
    section = text.split("### Quoting override values", 1)[1].split("\n#", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    found = []
    for line in block.splitlines():
        args = shlex.split(line, comments=True)
        assert args[:2] == ["./spark-submit.sh", "job=demo/orders"], line
        found += args[2:]
    return found


@pytest.mark.e2e
def test_the_readme_s_quoted_override_values_arrive_intact() -> None:
    """A whole command, for argument splitting: each value, split as the shell splits the
    README's lines, must pass the wrapper, the launcher and spark-submit (which hands the driver
    its arguments anew) intact; only a real process shows what the driver is given."""
    overrides = readme_overrides()
    assert sorted(o.split("=", 1)[0] for o in overrides) == sorted(QUOTED), "README and test show the same keys"
    proc = submit("job=demo/orders", "--cfg", "job", *overrides)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    lines = proc.stdout.splitlines()
    config = yaml.safe_load("\n".join(lines[lines.index("spark:") :]))
    for key, want in QUOTED.items():
        node = config
        for part in key.split("."):
            node = node[int(part)] if isinstance(node, list) else node[part]
        assert node == want, key


@pytest.mark.e2e
def test_no_run_writes_the_class_archive_unasked_and_drivers_start_on_the_one_written(tmp_path: Path) -> None:
    """A whole command, for set-up: the class archive is a JVM start option (``-Xshare``,
    ``-XX:SharedArchiveFile``), taken only when a JVM starts, as the wrapper starts it.

    The set-up runs no job and a run writes no class archive unless asked (``ENGINE_CDS=train``,
    which the test command takes once before the tests; here too when there is none); drivers
    start on it: with ``-Xshare:on`` the JVM refuses to start unless it maps the archive it is
    given, and its CDS log names the archive as the dynamic layer it mapped."""
    if os.environ.get("ENGINE_CDS") == "off":
        pytest.skip("ENGINE_CDS=off: no class archive")
    folder = REPO / ".cache" / "cds"
    if not list(folder.glob("*.jsa")):
        env = {**os.environ, "ENGINE_CDS": "train"}
        trained = submit("job=demo/orders", f"warehouse={tmp_path}", "mode=validate", env=env)
        assert trained.returncode == 0, trained.stderr[-3000:]
    before = {p.name: p.stat().st_size for p in folder.glob("*.jsa")}
    first = submit("job=demo/orders", f"warehouse={tmp_path}", "mode=validate")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "writing the driver's class archive" not in first.stderr, "no run writes one unasked"
    assert {p.name: p.stat().st_size for p in folder.glob("*.jsa")} == before
    archives = sorted(folder.glob("*.jsa"), key=lambda p: p.stat().st_mtime)
    opts = "-Xshare:on -Xlog:cds=info"
    proc = submit("--driver-java-options", opts, "job=demo/orders", f"warehouse={tmp_path}", "mode=validate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(proc)["status"] == "VALID"
    assert f"Opened archive {archives[-1].resolve()}." in proc.stdout
    assert "Mapped dynamic region" in proc.stdout
    garbage = tmp_path / "not-an-archive.jsa"
    garbage.write_bytes(b"\0" * 4096)
    refused = submit(
        "--driver-java-options", f"-Xshare:on -XX:SharedArchiveFile={garbage}", "job=demo/orders", "mode=validate"
    )
    assert refused.returncode != 0  # the check above can fail: an archive that does not map stops the JVM
