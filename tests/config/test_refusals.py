"""What composing refuses is one ``config error:`` line (issue 58, items 14 and 16): a job or
connection file that does not parse names the file, the line and the column; a missing jobs
folder says so; a missing job or flow, an unknown key and an unknown group's choice say which,
with the closest known name. Never a traceback, never Hydra's several lines. No JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import AppConfig, run_app
from engine.config.connections import CONNECTIONS_ENV, with_connections
from engine.errors import ConfigError

SOURCE = 'sources.in { type = files, format = json, path = "in/*.json" }\nsinks.lake { type = delta, path = lake }\n'


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What composing ``argv`` says, once it refused it before any run (exit code 2)."""
    seen: list[AppConfig] = []
    code = run_app(argv, lambda app: seen.append(app) or 0)  # type: ignore[func-returns-value]
    err = capsys.readouterr().err
    assert (code, seen) == (2, []), err
    assert err.startswith("config error: ") and err.count("\n") == 1, err  # one line
    assert "Traceback" not in err and "HYDRA_FULL_ERROR" not in err, err
    return err.removeprefix("config error: ").strip()


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "jobs"
    (folder / "team").mkdir(parents=True)
    (folder / "team" / "orders.conf").write_text(SOURCE)
    (folder / "flows" / "g").mkdir(parents=True)
    (folder / "flows" / "g" / "copy_orders.conf").write_text("flowGroup = g\n")
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(folder))
    return folder


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        pytest.param("bad.conf", SOURCE.replace("path = lake }", "path = lake"), "at line 3, column 1", id="hocon"),
        pytest.param("bad.yaml", "sources:\n  in: {type: files\n  x: [\n", "at line 3, column 4", id="yaml"),
        pytest.param("bad.yml", "sources:\n  in: files\n   out: x\n", "at line 3, column 7", id="yaml-indent"),
    ],
)
def test_a_job_file_that_does_not_parse_is_one_line_with_its_file_line_and_column(
    jobs: Path, name: str, text: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (jobs / name).write_text(text)
    said = refused(["job=bad"], capsys)
    assert f"cannot parse {'HOCON' if name.endswith('.conf') else 'YAML'} {where}: " in said
    assert said.endswith(f"(file {jobs / name})")


def test_a_connection_file_that_does_not_parse_is_one_line_with_its_line_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONNECTIONS_ENV, str(tmp_path))
    (tmp_path / "shop.yaml").write_text("type: jdbc\nurl: [unclosed\n")
    job = {"sources": {"db": {"type": "jdbc", "connection": "shop", "table": "t"}}}
    with pytest.raises(ConfigError) as info:
        with_connections({"job": job})
    said = str(info.value)
    assert "\n" not in said and "cannot parse YAML at line 3, column 1: " in said, said
    assert said.endswith(f"(file {tmp_path / 'shop.yaml'})")


def test_a_jobs_folder_that_does_not_exist_is_named_not_advised_as_plus_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(tmp_path / "nowhere"))
    for choice in ("job=team/orders", "flow=g/copy_orders"):
        said = refused([choice], capsys)
        assert f"the jobs folder {tmp_path / 'nowhere'} (ENGINE_JOBS_DIR) does not exist" in said
        assert "+job" not in said and "+flow" not in said


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["job=team/ordrs"], "no job `team/ordrs`: no team/ordrs.conf, .yaml or .yml in {jobs}", id="job"),
        pytest.param(["flow=g/copy_order"], "no flow `g/copy_order`: no g/copy_order.conf", id="flow"),
    ],
)
def test_a_missing_job_or_flow_is_one_line_with_the_closest_name(
    jobs: Path, argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    said = refused(argv, capsys)
    assert expected.format(jobs=jobs) in said
    assert said.endswith("did you mean `team/orders`?" if argv[0].startswith("job") else "`g/copy_orders`?"), said


def test_a_missing_job_with_nothing_close_lists_the_jobs_there_and_never_a_flow_or_template(
    jobs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (jobs / "templates" / "pack").mkdir(parents=True)
    (jobs / "templates" / "pack" / "copy.conf").write_text("a = 1\n")
    said = refused(["job=zzz"], capsys)
    assert said.endswith("known: team/orders"), said


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param(
            "job.sinks.lake.pathh=x",
            "unknown key `job.sinks.lake.pathh`: did you mean `job.sinks.lake.path`? "
            "(a key no documentation has is added as `+job.sinks.lake.pathh=x`)",
            id="a-sink-key",
        ),
        pytest.param("warehose=/x", "unknown key `warehose`: did you mean `warehouse`?", id="a-top-level-key"),
        pytest.param(
            "job.sinks.laek.path=x",
            "unknown key `job.sinks.laek` (in `job.sinks.laek.path`): did you mean `job.sinks.lake`?",
            id="a-missing-node",
        ),
        pytest.param(
            "job.sinks.lake.secret_key=hunter2", "added as `+job.sinks.lake.secret_key=...`", id="a-secret-not-echoed"
        ),
        pytest.param("spark=locl", "no `spark` config `locl` (did you mean `local`? known: local)", id="a-group"),
    ],
)
def test_an_unknown_key_or_choice_is_one_line_with_did_you_mean(
    jobs: Path, override: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    said = refused(["job=team/orders", override], capsys)
    assert expected in said, said
    assert "hunter2" not in said


def test_other_refusals_are_one_line_too(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = refused(["job=team/orders", "job.sinks.lake.path=a,b"], capsys)
    assert "Ambiguous value for argument 'job.sinks.lake.path=a,b'" in said
    said = refused(["job=team/orders", "job.sinks.lake.path=>"], capsys)
    assert "cannot read the override `job.sinks.lake.path=>`" in said
    said = refused(["job=team/orders", "mode=${oc.env:ENGINE_TEST_NO_SUCH_VARIABLE}"], capsys)
    assert "Environment variable 'ENGINE_TEST_NO_SUCH_VARIABLE' not found" in said and said.endswith("(key `mode`)")
    said = refused(["--cfg", "job", "job=team/orders", "job.sinks.lake.pathh=x"], capsys)
    assert "did you mean `job.sinks.lake.path`?" in said


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        pytest.param("t.conf", "a { b = 1\n", "cannot parse HOCON at line 2, column 1: Expected '}'", id="hocon"),
        pytest.param("t.yaml", "a:\n  b: [1\n", "cannot parse YAML at line 3, column 1: ", id="yaml"),
    ],
)
def test_a_template_or_topology_file_that_does_not_parse_is_one_line_too(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    from engine.config.templates import ParsedTemplate, read_config

    (tmp_path / name).write_text(text)
    for read in (read_config, ParsedTemplate) if name.endswith(".conf") else (read_config,):  # YAML: read when filled
        with pytest.raises(ConfigError) as info:
            read(tmp_path / name)
        said = str(info.value)
        assert said.startswith(expected) and "\n" not in said, said
        assert said.endswith(f"(file {tmp_path / name})")
