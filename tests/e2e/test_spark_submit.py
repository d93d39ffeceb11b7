"""End to end through ./spark-submit.sh, as a user runs it; outputs checked with delta-rs/pyarrow."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from deltalake import DeltaTable

from tests.e2e import REPO, SUBMIT

pytestmark = pytest.mark.e2e


def submit(
    *args: str, timeout: int = 600, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBMIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    last = proc.stdout.strip().splitlines()[-1]
    parsed = json.loads(last)
    assert isinstance(parsed, dict)
    return parsed


def rows(path: Path) -> list[dict[str, object]]:
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_demo_job_end_to_end(tmp_path: Path) -> None:
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


def test_yaml_job_and_validate_mode(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    proc = submit("job=demo/customers", f"warehouse={wh}", "mode=validate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(proc)["status"] == "VALID"
    assert not wh.exists()

    proc = submit("job=demo/customers", f"warehouse={wh}")
    assert proc.returncode == 0, proc.stderr[-3000:]
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
def test_config_errors_exit_2_with_one_message_and_nothing_written(tmp_path: Path, override: str, needle: str) -> None:
    wh = tmp_path / "wh"
    proc = submit("job=demo/orders", f"warehouse={wh}", override)
    # spark-submit's PythonRunner merges the driver's stderr into stdout: read both
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert needle in output
    assert "Traceback" not in output
    assert summary(proc)["status"] == "CONFIG_ERROR"
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
    tmp_path: Path, args: list[str], key: str, said: str
) -> None:
    """A schema Spark's parser refuses and a regex that does not compile were job failures (exit 1,
    no key); both are config errors naming the key and the file, before anything is written."""
    wh = tmp_path / "wh"
    proc = submit("job=demo/orders", f"warehouse={wh}", *args)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    message = str(summary(proc)["message"])
    assert said in message
    assert f"key `{key}`" in message and "jobs/demo/orders.conf" in message
    assert "Traceback" not in output
    assert not wh.exists() or list(wh.iterdir()) == []


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = submit("job=demo/orders", f"warehouse={tmp_path}", "job.sinks.lake.type=delat", "debug=true")
    assert proc.returncode == 2
    assert "Traceback" in proc.stdout + proc.stderr


def test_cfg_job_through_spark_submit() -> None:
    proc = submit("job=demo/orders", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "format: json" in proc.stdout
    assert "hydra:" not in proc.stdout


def test_status_checkpoint_and_an_idle_rerun_through_spark_submit(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    first = submit("job=demo/orders", f"warehouse={wh}")
    assert first.returncode == 0, first.stderr[-3000:]
    again = submit("job=demo/orders", f"warehouse={wh}")  # nothing new: nothing read, nothing written
    assert again.returncode == 0, again.stderr[-3000:]
    assert (summary(again)["records_read"], summary(again)["sinks"]) == (0, {})
    assert sorted(r["order_id"] for r in rows(wh / "orders")) == list(range(1, 41))

    status = submit("job=demo/orders", f"warehouse={wh}", "mode=status")
    assert status.returncode == 0, status.stderr[-3000:]
    report = summary(status)
    ((dataset, mark),) = [(d["dataset"], d["watermark"]) for d in report["datasets"]]  # type: ignore[union-attr]
    assert dataset.startswith("files:") and mark["path"].endswith(".json")
    assert "== datasets (current watermarks)" in status.stdout

    no_reason = submit(
        "job=demo/orders",
        f"warehouse={wh}",
        "mode=checkpoint",
        "checkpoint.action=reset",
        f"checkpoint.dataset={dataset}",
    )
    assert no_reason.returncode == 2 and "checkpoint.reason" in no_reason.stdout + no_reason.stderr
    reset = submit(
        "job=demo/orders",
        f"warehouse={wh}",
        "mode=checkpoint",
        "checkpoint.action=reset",
        f"checkpoint.dataset={dataset}",
        "checkpoint.reason=replay for the e2e test",
    )
    assert reset.returncode == 0, reset.stderr[-3000:]
    assert summary(reset)["status"] == "CHANGED"
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


def test_the_readme_s_quoted_override_values_arrive_intact() -> None:
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


def test_no_run_writes_the_class_archive_unasked_and_drivers_start_on_the_one_written(tmp_path: Path) -> None:
    """The set-up runs no job and a run writes no class archive unless asked (``ENGINE_CDS=train``,
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
