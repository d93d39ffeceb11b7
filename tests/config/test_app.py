"""Hydra composes HOCON and YAML jobs; every key can be overridden; mistakes exit 2. No JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import AppConfig, run_app
from engine.config.hocon import load_hocon
from engine.errors import ConfigError


def compose(argv: list[str]) -> tuple[int, list[AppConfig]]:
    seen: list[AppConfig] = []

    def task(app: AppConfig) -> int:
        seen.append(app)
        return 0

    return run_app(argv, task), seen


def test_hocon_job_is_selected_and_its_keys_overridden() -> None:
    code, (app,) = compose(["job=demo/orders", "job.sources.orders.path=/data/in", "warehouse=/tmp/wh"])
    assert code == 0
    assert app.job_choice == "demo/orders"
    assert app.job_file is not None and app.job_file.endswith("jobs/demo/orders.conf")
    assert app.data["job"]["sources"]["orders"]["path"] == "/data/in"
    assert app.data["job"]["sources"]["orders"]["schema"] == "schemas/orders.avsc"
    assert app.data["warehouse"] == "/tmp/wh"
    assert app.data["mode"] == "run"


def test_yaml_job_is_selected_the_same_way() -> None:
    code, (app,) = compose(["job=demo/customers", "job.sinks.customers.mode=append"])
    assert code == 0
    assert app.job_file is not None and app.job_file.endswith("jobs/demo/customers.yaml")
    assert app.data["job"]["sinks"]["customers"]["mode"] == "append"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        pytest.param(["job=demo/orders", "job.sources.ordrs.path=/x"], "ordrs", id="unknown-key"),
        pytest.param(["flow=demo/nope"], "demo/nope", id="unknown-flow"),
        pytest.param(["job=demo/nope"], "demo/nope", id="unknown-job"),
        pytest.param(["job=demo/orders", "warehose=/x"], "warehose", id="unknown-top-key"),
    ],
)
def test_composition_errors_exit_2_before_the_task(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, seen = compose(argv)
    assert (code, seen) == (2, [])
    assert needle in capsys.readouterr().err


def test_multirun_composes_each_job() -> None:
    code, seen = compose(["-m", "job=demo/orders,demo/customers"])
    assert code == 0
    assert [a.job_choice for a in seen] == ["demo/orders", "demo/customers"]


def test_hydra_mode_still_chooses_a_multirun_when_overridden() -> None:
    """The engine spares Hydra's second composition (to read ``hydra.mode``) only when no argument
    touches Hydra's config; an override of it is honoured as Hydra honours it."""
    code, seen = compose(["hydra.mode=MULTIRUN", "job=demo/orders,demo/customers"])
    assert code == 0
    assert [a.job_choice for a in seen] == ["demo/orders", "demo/customers"]


@pytest.mark.parametrize(
    ("argv", "may"),
    [
        (["job=demo/orders", "warehouse=/x", "++spark.conf={a.b:1}", "+job.x=1", "~job.y"], False),
        (["-m", "job=demo/orders,demo/customers"], False),
        (["--multirun", "job=demo/orders"], False),
        (["job=demo/orders", "hydra.mode=MULTIRUN"], True),
        (["job=demo/orders", "hydra/sweeper=basic"], True),
        (["job=demo/orders", "+hydra.job.env_set={A:1}"], True),
        (["job=demo/orders", "+experiment=fast"], True),
        (["--config-dir", "/elsewhere", "job=demo/orders"], True),
        (["-cn", "other", "job=demo/orders"], True),
    ],
)
def test_the_second_composition_is_spared_only_when_nothing_else_could_set_hydra_mode(
    argv: list[str], may: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.config.app import _may_set_mode

    monkeypatch.delenv("ENGINE_CONF_DIR", raising=False)
    assert _may_set_mode(argv) is may
    monkeypatch.setenv("ENGINE_CONF_DIR", "/elsewhere")
    assert _may_set_mode(argv) is True


def test_the_config_tree_leaves_hydra_mode_unset_as_the_spared_composition_assumes() -> None:
    from hydra._internal.hydra import Hydra
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    from engine.config.jobs_source import JobsConfigSource
    from engine.config.paths import conf_dir

    SourcesRegistry.instance().register(JobsConfigSource)
    hydra = Hydra.create_main_hydra2("t", create_config_search_path(str(conf_dir())))
    try:
        assert hydra.get_mode("config", ["job=demo/orders", "warehouse=/tmp/wh", "mode=status"]) is None
        assert str(hydra.get_mode("config", ["job=demo/orders", "hydra.mode=MULTIRUN"])) == "RunMode.MULTIRUN"
    finally:
        GlobalHydra.instance().clear()


def test_spark_settings_merge_with_the_defaults_and_new_ones_need_the_double_plus() -> None:
    """As the README's ``spark.conf`` row says: braces merge; a setting the defaults lack needs ``++``."""
    code, (app,) = compose(["job=demo/orders", "spark.conf={spark.sql.shuffle.partitions:64}"])
    assert code == 0 and app.data["spark"]["conf"]["spark.sql.shuffle.partitions"] == 64
    assert app.data["spark"]["conf"]["spark.sql.session.timeZone"] == "UTC"
    assert compose(["job=demo/orders", "spark.conf={spark.sql.caseSensitive:true}"]) == (2, [])
    code, (app,) = compose(["job=demo/orders", "++spark.conf={spark.sql.caseSensitive:true}"])
    assert code == 0 and app.data["spark"]["conf"]["spark.sql.caseSensitive"] is True
    assert app.data["spark"]["conf"]["spark.sql.session.timeZone"] == "UTC"


def test_worst_exit_code_wins() -> None:
    assert (
        run_app(["-m", "job=demo/orders,demo/customers"], lambda app: 1 if "orders" in str(app.job_choice) else 0) == 1
    )


def test_cfg_job_prints_the_composed_job_with_secrets_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "pg.conf").write_text(
        'sources.db { type = files, format = json, path = x, options { password = "hunter2", user = bob } }\n'
        "sinks.out { type = console }\n"
    )
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(tmp_path))
    code = run_app(["--cfg", "job", "job=team/pg"], lambda app: 99)
    out = capsys.readouterr().out
    assert code == 0
    assert "hunter2" not in out
    assert "password: '***'" in out
    assert "user: bob" in out
    assert "warehouse:" in out and "hydra:" not in out


def test_hocon_includes_env_and_literal_dollar_braces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "common.conf").write_text("sinks.out { type = console }\n")
    (tmp_path / "j.conf").write_text(
        'include "common.conf"\n'
        "root = /data\n"
        "sources.s { type = files, format = text, path = ${root}/in, options { note = ${?NOTE} } }\n"
        "converters = [ { type = check, expr = \"x != '${not_interp}'\" } ]\n"
    )
    monkeypatch.setenv("NOTE", "from-env")
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(tmp_path))
    code, (app,) = compose(["job=j"])
    assert code == 0
    job = app.data["job"]
    assert job["sinks"]["out"]["type"] == "console"
    assert job["sources"]["s"]["path"] == "/data/in"
    assert job["sources"]["s"]["options"]["note"] == "from-env"
    assert job["converters"][0]["expr"] == "x != '${not_interp}'"


def test_malformed_hocon_exits_2_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.conf").write_text("sources { s { type = files \n")
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(tmp_path))
    code, seen = compose(["job=bad"])
    assert (code, seen) == (2, [])
    assert "bad.conf" in capsys.readouterr().err


def test_load_hocon_reports_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.conf"
    bad.write_text("a = [1, 2\n")
    with pytest.raises(ConfigError, match="cannot parse HOCON") as info:
        load_hocon(bad)
    assert info.value.file == str(bad)


def test_a_backfill_range_is_an_ordinary_override_on_every_source() -> None:
    code, (app,) = compose(
        ["job=demo/orders", "job.sources.orders.from=2026-11-01", "job.sources.orders.to=2026-11-02"]
    )
    assert code == 0
    assert (app.data["job"]["sources"]["orders"]["from"], app.data["job"]["sources"]["orders"]["to"]) == (
        "2026-11-01",
        "2026-11-02",
    )
    code, (plain,) = compose(["job=demo/orders"])
    assert plain.data["job"]["sources"]["orders"]["from"] is None  # unset: not a backfill
