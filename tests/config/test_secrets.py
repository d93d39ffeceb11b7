"""Encrypted config values (``ENC(...)``) and named connections: the master key's commands as a
user types them, real JDBC jobs whose password is encrypted (in the job, or in a connection file),
the places a revealed plaintext must never appear, and the mistakes that must be exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from engine.config.connections import CONNECTIONS_ENV
from engine.config.secrets import MASTER_KEY_ENV, Secrets, encrypt
from engine.errors import EXIT_CONFIG, ConfigError
from tests.helpers import delta_ids, run_cli
from tests.sqllog import SqlLog

REPO = Path(__file__).resolve().parents[2]
PLAINTEXT = "pa55-w0rd-that-must-not-leak"


def command(*args: str, key_file: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``./spark-submit.sh <args>`` for the key's commands (which start no JVM), as a process."""
    env = {**os.environ, MASTER_KEY_ENV: str(key_file)}
    return subprocess.run(
        ["bash", str(REPO / "spark-submit.sh"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def command_here(
    monkeypatch: pytest.MonkeyPatch, *args: str, key_file: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """The same command line in this process, through ``main()`` (which runs the key's commands
    before anything else, as the launcher does): its exit code, stdout and stderr."""
    from engine.cli.app import main

    monkeypatch.setenv(MASTER_KEY_ENV, str(key_file))
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))  # not a terminal: the value is read from it
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    assert code is not None, "main() always exits"
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "master.key"
    path.write_text(Fernet.generate_key().decode() + "\n")
    monkeypatch.setenv(MASTER_KEY_ENV, str(path))
    return path


def enc(plaintext: str, key_file: Path) -> str:
    return encrypt(plaintext, Fernet(key_file.read_text().strip().encode()))


def test_a_value_encrypted_by_the_command_is_revealed_with_its_key_and_masked_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mode=encrypt`` runs as a process, through ``spark-submit.sh``: the value must reach it on
    the wrapper's standard input, and the wrapper's stdout hold the encrypted value alone, the
    plaintext on neither stream. The key's other commands run in this process."""
    key = tmp_path / "keys" / "master.key"
    key.parent.mkdir()
    made = command_here(monkeypatch, "mode=new_key", key_file=key)
    assert made.returncode == 0, made.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    again = command_here(monkeypatch, "mode=new_key", key_file=key)  # a key is never overwritten
    assert again.returncode == EXIT_CONFIG and "never overwritten" in again.stderr
    before = key.read_text()

    done = command("mode=encrypt", key_file=key, stdin=PLAINTEXT + "\n")
    assert done.returncode == 0, done.stderr
    (value,) = done.stdout.split()
    assert value.startswith("ENC(") and PLAINTEXT not in done.stdout + done.stderr
    assert key.read_text() == before

    secrets = Secrets({MASTER_KEY_ENV: str(key)})
    config = {"job": {"sources": {"db": {"password": value, "user": "u"}}, "tags": ["a", value]}}
    revealed = secrets.reveal(config)
    assert revealed["job"]["sources"]["db"] == {"password": PLAINTEXT, "user": "u"}
    assert revealed["job"]["tags"] == ["a", PLAINTEXT]
    assert config["job"]["sources"]["db"]["password"] == value  # the composed config is left as it was
    assert secrets.mask(f"login failed for {PLAINTEXT}!") == "login failed for ***!"


def test_encrypt_refuses_an_empty_value_and_a_missing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "master.key"
    no_key = command_here(monkeypatch, "mode=encrypt", key_file=key, stdin="x")
    assert no_key.returncode == EXIT_CONFIG and str(key) in no_key.stderr and no_key.stdout == ""
    assert command_here(monkeypatch, "mode=new_key", key_file=key).returncode == 0
    empty = command_here(monkeypatch, "mode=encrypt", key_file=key, stdin="\n")
    assert empty.returncode == EXIT_CONFIG and "nothing to encrypt" in empty.stderr


@pytest.mark.parametrize("mistake", ["other key", "changed value", "no key set", "not a key"])
def test_a_value_that_does_not_decrypt_is_a_config_error_naming_its_key_never_its_plaintext(
    tmp_path: Path, key_file: Path, mistake: str
) -> None:
    value = enc(PLAINTEXT, key_file)
    env = {MASTER_KEY_ENV: str(key_file)}
    if mistake == "other key":
        other = tmp_path / "other.key"
        other.write_text(Fernet.generate_key().decode())
        env = {MASTER_KEY_ENV: str(other)}
    elif mistake == "changed value":
        token = value[4:-1]
        value = f"ENC({token[:-6]}{'A' if token[-6] != 'A' else 'B'}{token[-5:]})"
    elif mistake == "no key set":
        env = {}
    else:
        bad = tmp_path / "bad.key"
        bad.write_text("not a fernet key")
        env = {MASTER_KEY_ENV: str(bad)}
    with pytest.raises(ConfigError) as caught:
        Secrets(env).reveal({"job": {"sources": {"db": {"password": value}}}})
    said = str(caught.value)
    assert PLAINTEXT not in said and MASTER_KEY_ENV in said
    if mistake in ("other key", "changed value"):
        assert caught.value.key == "job.sources.db.password"


def test_a_short_value_is_not_masked_and_the_run_is_told_which(
    key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secrets = Secrets()
    with caplog.at_level(logging.WARNING):
        assert secrets.reveal({"job": {"port": enc("a1", key_file)}}) == {"job": {"port": "a1"}}
    assert "job.port: a decrypted value of under 4 characters is not masked" in caplog.text
    assert secrets.mask("run 20261126T225150Z-a1b2c3d4") == "run 20261126T225150Z-a1b2c3d4"


def test_a_value_is_masked_as_repr_and_json_escape_it(key_file: Path) -> None:
    odd = "p\\w\"q'x"
    secrets = Secrets()
    secrets.reveal({"password": enc(odd, key_file)})
    for shown in (odd, repr(odd), json.dumps(odd), json.dumps({"p": odd})):
        assert "***" in secrets.mask(shown) and "p\\" not in secrets.mask(shown), shown


def test_log_lines_mask_what_the_run_revealed(key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s", force=True)
    secrets = Secrets()
    secrets.reveal({"password": enc(PLAINTEXT, key_file)})
    with secrets.masking_logs():
        logging.getLogger("engine.test").info("connecting with %s", PLAINTEXT)
        try:
            raise RuntimeError(f"refused: {PLAINTEXT}")
        except RuntimeError:
            logging.getLogger("engine.test").exception("failed")
        logging.getLogger("engine.test").info("%s and %s", "one argument too few")  # reported, not raised
    logging.getLogger("engine.test").info("after: %s", "plain")
    said = capsys.readouterr().err
    assert "connecting with ***" in said and "refused: ***" in said and "after: plain" in said
    assert PLAINTEXT not in said


# -- a real job ---------------------------------------------------------------------------------


def jdbc_job(jobs: Path, postgres: Any, table: str, password: str, **sink: str) -> None:
    (jobs / "t").mkdir(parents=True, exist_ok=True)
    job = {
        "sources": {
            "db": {
                "type": "jdbc",
                "url": postgres.jdbc_url,
                "table": table,
                "user": postgres.user,
                "password": password,
                "incremental": {"column": "id"},
            }
        },
        "sinks": {"out": {"type": "delta", "path": "out", **sink}},
    }
    (jobs / "t" / "secret.conf").write_text(json.dumps(job))  # JSON is HOCON


def leaks(root: Path, said: str, plaintext: str = PLAINTEXT) -> list[str]:
    """Where ``plaintext`` shows: in the run's output, in any file under ``root``, or in any row of
    the Delta tables there (read with delta-rs: a compressed Parquet page hides its bytes)."""
    from deltalake import DeltaTable

    found = ["output"] if plaintext in said else []
    for path in root.rglob("*"):
        if path.is_file() and plaintext.encode() in path.read_bytes():
            found.append(str(path))
        if path.name == "_delta_log" and plaintext in str(DeltaTable(str(path.parent)).to_pyarrow_table().to_pylist()):
            found.append(str(path.parent))
    return found


@pytest.fixture
def secret_table(postgres: Any) -> str:
    postgres.psql("CREATE ROLE secret_reader LOGIN PASSWORD '" + PLAINTEXT + "'")
    postgres.psql("CREATE TABLE secret_orders (id BIGINT, note TEXT)")
    postgres.psql("INSERT INTO secret_orders SELECT g, 'n' || g FROM generate_series(1, 25) g")
    postgres.psql("GRANT SELECT ON secret_orders TO secret_reader")
    try:
        yield "secret_orders"
    finally:
        postgres.psql("DROP TABLE secret_orders")
        postgres.psql("DROP ROLE secret_reader")


def test_a_jdbc_job_reads_with_its_encrypted_password_and_nothing_it_writes_shows_it(
    spark: Any, lake: Path, postgres: Any, secret_table: str, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = lake.parent / "jobs"
    reader = type("Reader", (), {"jdbc_url": postgres.jdbc_url, "user": "secret_reader"})
    jdbc_job(jobs, reader, secret_table, enc(PLAINTEXT, key_file))
    sql = SqlLog(spark)
    code, summary, said = run_cli(jobs, "job=t/secret", f"warehouse={lake}", "debug=true")
    assert code == 0, said[-3000:]
    assert summary["records_read"] == 25
    assert delta_ids(lake / "out") == list(range(1, 26))
    assert leaks(lake, said) == []
    # what Spark's UI shows: the SQL tab's plans and nodes, the environment tab's settings
    shown = [e.plan + "".join(n.name + n.desc for n in e.nodes) for e in sql.executions()]
    assert shown and not [p for p in shown if PLAINTEXT in p]
    assert PLAINTEXT not in str(spark.sparkContext.getConf().getAll())

    # --cfg shows the encrypted form, never the plaintext (the command line, in this process)
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(jobs))
    shown = command_here(monkeypatch, "job=t/secret", "--cfg", "job", "--resolve", key_file=key_file)
    assert shown.returncode == 0, shown.stderr
    assert PLAINTEXT not in shown.stdout and "password" in shown.stdout


def test_with_the_wrong_key_the_job_is_exit_2_naming_the_key_and_writes_nothing(
    spark: Any, lake: Path, postgres: Any, key_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = lake.parent / "jobs"
    jdbc_job(jobs, postgres, "no_such_table", enc(PLAINTEXT, key_file))
    other = tmp_path / "other.key"
    other.write_text(Fernet.generate_key().decode())
    monkeypatch.setenv(MASTER_KEY_ENV, str(other))
    code, summary, said = run_cli(jobs, "job=t/secret", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert summary["status"] == "CONFIG_ERROR" and "job.sources.db.password" in summary["message"]
    assert not (lake / "out").exists() and not (lake / "_engine").exists()
    assert leaks(lake, said) == []


def test_a_revealed_value_quoted_by_an_error_message_is_masked(spark: Any, lake: Path, key_file: Path) -> None:
    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True)
    src = lake.parent / "in.json"
    src.write_text('{"id": 1}\n')
    secret = enc(PLAINTEXT, key_file)
    job = {
        "sources": {"s": {"type": "files", "format": "json", "path": str(src), "limits": {"max_bytes": secret}}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    (jobs / "t" / "masked.conf").write_text(json.dumps(job))
    code, summary, said = run_cli(jobs, "job=t/masked", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "job.sources.s.limits.max_bytes" in summary["message"] and "`***` is not a size" in summary["message"]
    assert leaks(lake, said) == []


def test_a_revealed_value_in_a_failed_runs_message_is_masked(
    spark: Any, lake: Path, postgres: Any, key_file: Path
) -> None:
    hidden = "missing_secret_table_x9"
    jobs = lake.parent / "jobs"
    jdbc_job(jobs, postgres, enc(hidden, key_file), postgres.password)
    code, summary, said = run_cli(jobs, "job=t/secret", f"warehouse={lake}")
    assert code == 2, said[-3000:]  # no such table: a config error (the database says so), naming `table`
    assert "***" in summary["message"]  # the error names the relation
    assert leaks(lake, said, hidden) == []


def test_the_metadata_store_masks_the_messages_it_stores(spark: Any, lake: Path, key_file: Path) -> None:
    from datetime import datetime, timezone

    from engine.state.delta_runs import DeltaRunStore
    from engine.state.delta_store import DeltaMetadataStore
    from engine.state.rows import FlowStatusRow, JobStatusRow, LogRow
    from engine.state.runs import RunRecord
    from engine.state.status import Status

    secrets = Secrets()
    secrets.reveal({"password": enc(PLAINTEXT, key_file)})
    store = DeltaMetadataStore(spark, str(lake / "_engine"), mask=secrets.mask).ensure()
    now = datetime.now(timezone.utc)
    said = f"login refused for {PLAINTEXT}"
    store.add_job_status(
        [JobStatusRow("r1", "j", "d", "live", "ds", Status.FAILED, said, 0, 0, 0.0, None, None, now, now)]
    )
    store.add_flow_status(FlowStatusRow("r1", "j", Status.FAILED, said, 1, 0, 1, 0, now, now))
    store.append_log([LogRow("j", "d", "live", 1, "attempt", "r1", now, message=said)])
    runs = DeltaRunStore(spark, str(lake / "_engine" / "runs"), mask=secrets.mask)
    runs.append(RunRecord("r1", "j", "d", Status.FAILED, now, now, message=said))
    assert leaks(lake, "") == []
    assert [r.message for r in store.job_status("j")] == ["login refused for ***"]


# -- connections ---------------------------------------------------------------------------------


def connection_job(jobs: Path, table: str, **source: Any) -> None:
    (jobs / "t").mkdir(parents=True, exist_ok=True)
    job = {
        "sources": {"db": {"type": "jdbc", "connection": "shop", "table": table, **source}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    (jobs / "t" / "conn.conf").write_text(json.dumps(job))


@pytest.fixture
def connections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "connections"
    folder.mkdir()
    monkeypatch.setenv(CONNECTIONS_ENV, str(folder))
    return folder


def test_a_job_reads_through_a_named_connection_whose_password_is_encrypted(
    spark: Any, lake: Path, postgres: Any, secret_table: str, key_file: Path, connections: Path
) -> None:
    (connections / "shop.yaml").write_text(
        f"type: jdbc\nurl: {postgres.jdbc_url}\nuser: secret_reader\npassword: {enc(PLAINTEXT, key_file)}\n"
    )
    jobs = lake.parent / "jobs"
    connection_job(jobs, secret_table, incremental={"column": "id"})
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    assert delta_ids(lake / "out") == list(range(1, 26))
    assert leaks(lake, said) == []

    (connections / "shop.yaml").unlink()  # HOCON works too, and the job's own keys win
    (connections / "shop.conf").write_text(
        f'type = jdbc\nurl = "{postgres.jdbc_url}"\nuser = nobody\npassword = "{enc(PLAINTEXT, key_file)}"\n'
    )
    connection_job(jobs, secret_table, user="secret_reader", incremental={"column": "id"})
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    assert summary["records_read"] == 0  # the same rows: already read
    assert leaks(lake, said) == []


@pytest.mark.parametrize(
    ("file", "text", "needle"),
    [
        (None, "", "no connection `shop`"),
        ("shop.yaml", "type: ftp\n", "unknown connection type `ftp`"),
        ("shop.yaml", "type: jdbc\nurl: jdbc:x\nhost: db\n", "not `host`"),
        ("shop.yaml", "type: jdbc\nurl: [unclosed\n", "cannot parse YAML at line 3, column 1: "),
    ],
    ids=["missing", "unknown-type", "unknown-key", "bad-yaml"],
)
def test_a_connection_mistake_is_exit_2_naming_the_key_or_the_file(
    spark: Any, lake: Path, connections: Path, file: str | None, text: str, needle: str
) -> None:
    (connections / "other.yaml").write_text("type: jdbc\nurl: jdbc:x\n")
    if file:
        (connections / file).write_text(text)
    jobs = lake.parent / "jobs"
    connection_job(jobs, "t")
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert needle in summary["message"]
    where = "job.sources.db.connection" if file is None else str(connections / file)
    assert where in summary["message"]
    if file is None:
        assert "known: other" in summary["message"]
    assert not lake.exists() or not any(lake.iterdir())


def test_a_connection_value_that_does_not_decrypt_names_the_connection_file_and_its_key(
    tmp_path: Path, key_file: Path, connections: Path
) -> None:
    """Issue 58, item 17: the token is in the connection's file, not in the job's."""
    elsewhere = Fernet(Fernet.generate_key())
    (connections / "shop.yaml").write_text(
        f"type: jdbc\nurl: jdbc:postgresql://db:5432/shop\nuser: u\npassword: {encrypt(PLAINTEXT, elsewhere)}\n"
    )
    jobs = tmp_path / "jobs"
    connection_job(jobs, "orders")
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={tmp_path / 'wh'}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert summary["message"].startswith("cannot decrypt this ENC(...) value")
    assert summary["message"].endswith(f"(key `password`, file {connections / 'shop.yaml'})"), summary["message"]
    assert "conn.conf" not in said and PLAINTEXT not in said


def test_with_no_master_key_the_message_names_the_first_encrypted_value_and_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connections: Path
) -> None:
    """Issue 58, item 17: which value needs the key, in the job file or in a connection's."""
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    token = encrypt(PLAINTEXT, Fernet(Fernet.generate_key()))
    jobs = tmp_path / "jobs"
    connection_job(jobs, "orders", password=token)
    (connections / "shop.yaml").write_text("type: jdbc\nurl: jdbc:postgresql://db:5432/shop\n")
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={tmp_path / 'wh'}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert f"{MASTER_KEY_ENV} is not set" in summary["message"]
    assert summary["message"].endswith(f"(key `job.sources.db.password`, file {jobs / 't' / 'conn.conf'})")

    connection_job(jobs, "orders")
    (connections / "shop.yaml").write_text(f"type: jdbc\nurl: jdbc:postgresql://db:5432/shop\npassword: {token}\n")
    code, summary, said = run_cli(jobs, "job=t/conn", f"warehouse={tmp_path / 'wh'}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert summary["message"].endswith(f"(key `password`, file {connections / 'shop.yaml'})"), summary["message"]


def test_a_connection_of_another_kind_is_refused(spark: Any, lake: Path, connections: Path) -> None:
    (connections / "shop.yaml").write_text("type: jdbc\nurl: jdbc:x\n")
    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True)
    job = {
        "sources": {"s": {"type": "files", "format": "json", "path": "/nowhere", "connection": "shop"}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    (jobs / "t" / "files.conf").write_text(json.dumps(job))
    code, summary, said = run_cli(jobs, "job=t/files", f"warehouse={lake}")
    assert code == EXIT_CONFIG, said[-3000:]
    assert "a jdbc connection" in summary["message"] and "job.sources.s.connection" in summary["message"]


def test_connection_elsewhere_than_a_source_is_left_alone(spark: Any, lake: Path, connections: Path) -> None:
    """A column, a sink or a DAG may be called ``connection``: only a source's or a sink's own key names one."""
    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True)
    src = lake.parent / "in.json"
    src.write_text('{"id": 1, "connection": "wifi"}\n{"id": 2, "connection": "lte"}\n')
    job = {
        "dags": {
            "connection": {
                "sources": {"s": {"type": "files", "format": "json", "path": str(src)}},
                "converters": [{"type": "rename", "columns": {"connection": "link"}}],
                "sinks": {"connection": {"type": "delta", "path": "out"}},
            }
        }
    }
    (jobs / "t" / "cols.conf").write_text(json.dumps(job))
    code, _, said = run_cli(jobs, "job=t/cols", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    assert sorted(delta_ids(lake / "out", "link")) == ["lte", "wifi"]


def test_a_connection_fills_dags_templates_and_discovery_and_merges_options(connections: Path) -> None:
    from engine.config.connections import with_connections

    (connections / "db.yaml").write_text("type: jdbc\nurl: jdbc:x\nuser: u\noptions: {a: 1, b: 2}\n")
    source = {"type": "jdbc", "connection": "db", "table": "t", "options": {"b": 3}}
    data = {
        "warehouse": "/w",
        "job": {
            "dags": {"d": {"sources": {"s": dict(source)}}},
            "fan_out": {
                "discover": {"type": "jdbc_tables", "connection": "db", "schema": "public"},
                "template": {"sources": {"s": dict(source)}},
            },
        },
    }
    out = with_connections(data)["job"]
    filled = {"type": "jdbc", "table": "t", "url": "jdbc:x", "user": "u", "options": {"a": 1, "b": 3}}
    assert out["dags"]["d"]["sources"]["s"] == filled
    assert out["fan_out"]["template"]["sources"]["s"] == filled
    assert out["fan_out"]["discover"] == {"type": "jdbc_tables", "schema": "public", "url": "jdbc:x", "user": "u"}
    assert data["job"]["dags"]["d"]["sources"]["s"]["connection"] == "db"  # the composed config is kept


def test_kafka_connections_fill_sources_and_sinks_and_a_jdbc_one_fills_a_sink(connections: Path) -> None:
    from engine.config.connections import with_connections

    (connections / "bus.yaml").write_text(
        "type: kafka\nbootstrap_servers: b1:9092\noptions: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN}\n"
    )
    (connections / "serving.yaml").write_text("type: jdbc\nurl: jdbc:postgresql://db/s\nuser: w\npassword: p\n")
    job = {
        "sources": {"in": {"type": "kafka", "connection": "bus", "topics": ["t"], "options": {"sasl.mechanism": "X"}}},
        "sinks": {
            "db": {"type": "jdbc", "connection": "serving", "table": "c", "mode": "upsert", "keys": ["id"]},
            "out": {"type": "kafka", "connection": "bus", "topic": "o"},
        },
    }
    out = with_connections({"warehouse": "/w", "job": job})["job"]
    options = {"security.protocol": "SASL_SSL", "sasl.mechanism": "X"}
    assert out["sources"]["in"] == {
        "type": "kafka",
        "topics": ["t"],
        "bootstrap_servers": "b1:9092",
        "options": options,
    }
    assert out["sinks"]["db"] == {
        "type": "jdbc",
        "table": "c",
        "mode": "upsert",
        "keys": ["id"],
        "url": "jdbc:postgresql://db/s",
        "user": "w",
        "password": "p",
    }
    assert out["sinks"]["out"]["bootstrap_servers"] == "b1:9092" and "connection" not in out["sinks"]["out"]
    job["sinks"]["out"]["type"] = "delta"
    with pytest.raises(ConfigError, match="a kafka connection") as refused:
        with_connections({"warehouse": "/w", "job": job})
    assert refused.value.key == "job.sinks.out.connection"
