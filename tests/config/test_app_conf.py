"""The application config around the job (``conf/config.yaml``) is validated like the job: what the
README and the tests write is accepted, a bad value is one config error naming its key. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import AppConfig, run_app
from engine.errors import EXIT_CONFIG, ConfigError
from engine.spec.app import MODES, PROGRESS_VIEWS, AppConf, app_conf
from tests.helpers import run_cli

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def composed(*overrides: str) -> dict[str, Any]:
    seen: list[AppConfig] = []

    def task(app: AppConfig) -> int:
        seen.append(app)
        return 0

    assert run_app(["job=demo/orders", *overrides], task) == 0
    return seen[0].data


def test_the_shipped_defaults_are_valid() -> None:
    conf = app_conf(composed())
    assert (conf.mode, conf.progress, conf.debug, conf.status.runs, conf.lease.ttl_seconds) == (
        "run",
        "auto",
        False,
        5,
        600,
    )
    assert conf.checkpoint.action == conf.commit.action == "show"
    assert conf.spark.app_name == "engine" and conf.spark.conf["spark.sql.session.timeZone"] == "UTC"
    assert conf.job["sources"]["orders"]["type"] == "files"


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param(["mode=status", "status.runs=10"], id="status"),
        pytest.param(["debug=true", "progress=off", "warehouse=/tmp/wh"], id="debug-progress"),
        pytest.param(["mode=checkpoint", "checkpoint.action=set", "checkpoint.value=1700000000000"], id="long-value"),
        pytest.param(["mode=checkpoint", "checkpoint.value='1700000000000|/data/in/a.json'"], id="file-value"),
        pytest.param(
            ["mode=checkpoint", "checkpoint.kind=long", "checkpoint.reason=replay after bad deploy"], id="kind"
        ),
        pytest.param(["mode=commit", "commit.action=release", "commit.batch=3", "commit.dag=a"], id="commit"),
        pytest.param(["lease.ttl_seconds=60"], id="lease"),
        pytest.param(["spark.app_name=nightly"], id="spark"),
        pytest.param(["metadata.backend=spark"], id="metadata-spark"),
        pytest.param(["metadata.backend=delta_rs"], id="metadata-delta-rs"),
    ],
)
def test_what_the_readme_and_tests_write_is_accepted(overrides: list[str]) -> None:
    assert isinstance(app_conf(composed(*overrides)), AppConf)


def test_free_text_keys_keep_numbers_as_they_were_written() -> None:
    conf = app_conf(composed("checkpoint.value=1700000000000", "commit.batch=3"))
    assert (conf.checkpoint.value, conf.commit.batch) == ("1700000000000", 3)


def test_a_multi_long_checkpoint_value_hydra_reads_as_a_list_stays_its_text() -> None:
    conf = app_conf(composed("mode=checkpoint", "checkpoint.action=set", "checkpoint.value=[1,2,3]"))
    assert conf.checkpoint.value == "[1, 2, 3]"


def base(**changes: Any) -> dict[str, Any]:
    return {"warehouse": "/tmp/wh", "job": {}, **changes}


@pytest.mark.parametrize(
    ("data", "key", "match"),
    [
        pytest.param(base(mode="rum"), "mode", "unknown mode `rum`; use one of: run, validate", id="mode"),
        pytest.param(
            base(progress="loud"), "progress", "unknown progress view `loud`; use one of: auto", id="progress"
        ),
        pytest.param(base(lease={"ttl_seconds": "soon"}), "lease.ttl_seconds", "`soon` is not a number", id="ttl-text"),
        pytest.param(base(lease={"ttl_seconds": 2}), "lease.ttl_seconds", "a lease of 2s is too short", id="ttl-short"),
        pytest.param(base(lease={"ttl": 60}), "lease.ttl", "known keys: ttl_seconds", id="lease-typo"),
        pytest.param(base(status={"runs": "many"}), "status.runs", "valid integer", id="runs-text"),
        pytest.param(base(status={"runs": 0}), "status.runs", "greater than or equal to 1", id="runs-zero"),
        pytest.param(base(debug="sometimes"), "debug", "valid boolean", id="debug"),
        pytest.param(base(checkpoint={"actoin": "set"}), "checkpoint.actoin", "did you mean `action`", id="ckpt-typo"),
        pytest.param(base(commit={"reasons": "x"}), "commit.reasons", "did you mean `reason`", id="commit-typo"),
        pytest.param(base(commit={"batch": "last"}), "commit.batch", "valid integer", id="batch-text"),
        pytest.param(base(commit={"batch": -1}), "commit.batch", "greater than or equal to 0", id="batch-negative"),
        pytest.param(base(spark={"conf": "x"}), "spark.conf", "valid dictionary", id="spark-conf"),
        pytest.param(base(extra=1), "extra", "unknown key", id="unknown-top-key"),
        pytest.param(
            base(metadata={"backend": "hive"}),
            "metadata.backend",
            "unknown metadata backend `hive`; use one of: auto, spark, delta_rs",
            id="metadata-backend",
        ),
        pytest.param({"job": {}}, "warehouse", "missing required key", id="no-warehouse"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_its_key(data: dict[str, Any], key: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        app_conf(data, file="conf/config.yaml")
    assert caught.value.key == key
    assert caught.value.exit_code == EXIT_CONFIG
    assert f"key `{key}`" in str(caught.value) and "conf/config.yaml" in str(caught.value)


def test_the_modes_and_views_are_the_cli_s() -> None:
    from engine.cli.modes import HANDLERS
    from engine.cli.progress import MODES as VIEWS

    assert tuple(HANDLERS) == MODES
    assert VIEWS == PROGRESS_VIEWS


@pytest.mark.parametrize(
    ("override", "key"),
    [
        pytest.param("lease.ttl_seconds=1", "lease.ttl_seconds", id="lease"),
        pytest.param("status.runs=none", "status.runs", id="runs"),
        pytest.param("mode=plna", "mode", id="mode"),
        pytest.param("commit.batch=abc", "commit.batch", id="batch"),
        pytest.param("metadata.backend=rust", "metadata.backend", id="metadata-backend"),
    ],
)
def test_the_command_line_exits_2_naming_the_key_before_spark_starts(
    override: str, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.runtime.session

    def no_spark(*_: Any, **__: Any) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(engine.runtime.session, "build_session", no_spark)
    code, summary, err = run_cli(JOBS, "job=demo/orders", f"warehouse={tmp_path}", override)
    assert (code, summary["status"]) == (EXIT_CONFIG, "CONFIG_ERROR")
    assert f"key `{key}`" in summary["message"] and f"key `{key}`" in err


def test_metadata_backend_spark_reaches_a_local_warehouse_through_spark(spark: Any, tmp_path: Path) -> None:
    """The same run both ways leaves the same rows (read back with delta-rs); the tables' first
    commit says who wrote them: Spark's Delta, or the engine's own first commit (delta-rs path)."""
    from deltalake import DeltaTable

    for backend in ("spark", "auto"):
        wh = tmp_path / backend
        code, _, err = run_cli(JOBS, "job=demo/orders", f"warehouse={wh}", f"metadata.backend={backend}")
        assert code == 0, err[-3000:]
        runs = DeltaTable(str(wh / "_engine" / "runs")).to_pyarrow_table().to_pylist()
        assert sorted(r["status"] for r in runs) == ["RUNNING", "SUCCEEDED"]
        assert DeltaTable(str(wh / "_errors" / "orders")).to_pyarrow_table().num_rows == 7
        created = DeltaTable(str(wh / "_engine" / "state")).history()[-1]  # commit 0: who wrote it
        assert created["engineInfo"].startswith("Apache-Spark") == (backend == "spark"), created


def test_a_bucket_served_by_two_s3_connections_is_a_config_error_naming_both(tmp_path: Path) -> None:
    from engine.config.connections import CONNECTIONS_ENV, with_connections

    for name, buckets in (("lake_a", "[lake, raw]"), ("lake_b", "[raw]")):
        (tmp_path / f"{name}.yaml").write_text(f"type: s3\nbuckets: {buckets}\nregion: eu-west-1\n")
    data = base(storage={"connections": ["lake_a", "lake_b"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CONNECTIONS_ENV, str(tmp_path))
        loaded = with_connections(data)
    with pytest.raises(ConfigError, match=r"bucket `raw` is served by connections `lake_a` and `lake_b`") as info:
        app_conf(loaded)
    assert info.value.key is not None and info.value.key.startswith("storage.connections")


@pytest.mark.parametrize("under", ["", "/sub"], ids=["the-file", "under-the-file"])
def test_a_warehouse_that_is_a_file_is_a_config_error_naming_warehouse(tmp_path: Path, under: str) -> None:
    """Issue 58, item 18: exit 1 with a raw ``[Errno 20] Not a directory`` before."""
    (tmp_path / "wh").write_text("not a folder\n")
    with pytest.raises(ConfigError, match=r"(is|which is) a file, not a folder") as caught:
        app_conf(base(warehouse=str(tmp_path / "wh") + under))
    assert caught.value.key == "warehouse" and caught.value.exit_code == EXIT_CONFIG
    app_conf(base(warehouse=str(tmp_path / "new" / "wh")))  # a folder yet to be made is fine
    app_conf(base(warehouse="s3a://bucket/wh"))  # an object store has no such thing to check


@pytest.mark.parametrize("mode", ["run", "validate"])
def test_the_command_line_refuses_a_warehouse_that_is_a_file_before_spark_starts(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.runtime.session

    def no_spark(*_: Any, **__: Any) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(engine.runtime.session, "build_session", no_spark)
    (tmp_path / "wh").write_text("not a folder\n")
    code, summary, err = run_cli(JOBS, "job=demo/orders", f"warehouse={tmp_path / 'wh'}", f"mode={mode}")
    assert (code, summary["status"]) == (EXIT_CONFIG, "CONFIG_ERROR"), err
    assert summary["message"].startswith(f"the warehouse {tmp_path / 'wh'} is a file, not a folder")
    assert summary["message"].endswith("(key `warehouse`)")  # not the job file's: it is not set there
    assert "Errno" not in err and (tmp_path / "wh").read_text() == "not a folder\n"
