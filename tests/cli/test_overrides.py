"""Every documented key is overridable as ``key=value``, set in the job file or not (the plugins'
defaults are filled in while Hydra composes, and dropped again where an override left them); a
key no documentation has is still refused, naming it. Composition only: no JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.cli.app import compose_and_run
from engine.config import AppConfig
from engine.spec import compile_job

FLIGHTS = """
sources.flights { type = files, format = json, path = "in/*.json", schema = "id BIGINT" }
converters = [{ type = dedupe, keys = [id] }]
sinks.lake { type = delta, path = flights }
"""
MULTI = """
dags {
  land { sources.s { type = files, format = json, path = "in/*.json" }, sinks.lake { type = delta, path = a } }
}
fan_out {
  datasets = [x]
  template { sources.s { type = delta, path = a }, sinks.out { type = parquet, path = "b/{dataset}" } }
}
"""


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "flights.conf").write_text(FLIGHTS)
    (tmp_path / "t" / "multi.conf").write_text(MULTI)
    (tmp_path / "t" / "yaml.yaml").write_text("sources: {s: {type: delta, path: a}}\nsinks: {o: {type: console}}\n")
    monkeypatch.setenv("ENGINE_JOBS_DIR", str(tmp_path))
    return tmp_path


def composed(*argv: str) -> tuple[int, dict[str, Any]]:
    seen: list[AppConfig] = []
    code = compose_and_run(list(argv), lambda app: seen.append(app) or 0)  # type: ignore[func-returns-value]
    return code, seen[0].data["job"] if seen else {}


def at(job: dict[str, Any], dotted: str) -> Any:
    node: Any = job
    for part in dotted.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


@pytest.mark.parametrize(
    ("job", "override", "key", "value"),
    [
        pytest.param("t/flights", "job.sources.flights.lookback=0", "sources.flights.lookback", 0, id="source-key"),
        pytest.param("t/flights", "job.sinks.lake.mode=overwrite", "sinks.lake.mode", "overwrite", id="sink-key"),
        pytest.param(
            "t/flights",
            "job.converters.0.on_duplicate=reject",
            "converters.0.on_duplicate",
            "reject",
            id="converter-key",
        ),
        pytest.param(
            "t/flights",
            "job.sources.flights.limits.per_dataset.max_files=2",
            "sources.flights.limits.per_dataset.max_files",
            2,
            id="nested-source-key",
        ),
        pytest.param("t/flights", "job.errors.path=_errors/f", "errors.path", "_errors/f", id="job-key"),
        pytest.param("t/flights", "job.publish.policy=partial", "publish.policy", "partial", id="job-nested-key"),
        pytest.param("t/multi", "job.dags.land.priority=5", "dags.land.priority", 5, id="dag-key"),
        pytest.param(
            "t/multi",
            "job.dags.land.sinks.lake.mode=overwrite",
            "dags.land.sinks.lake.mode",
            "overwrite",
            id="dag-sink-key",
        ),
        pytest.param("t/multi", "job.fan_out.allow_empty=true", "fan_out.allow_empty", True, id="fan-out-key"),
        pytest.param(
            "t/multi",
            "job.fan_out.template.sinks.out.mode=overwrite",
            "fan_out.template.sinks.out.mode",
            "overwrite",
            id="fan-out-template-sink-key",
        ),
        pytest.param("t/yaml", "job.sources.s.changes=cdf", "sources.s.changes", "cdf", id="yaml-job"),
        pytest.param("t/yaml", "job.sinks.o.rows=5", "sinks.o.rows", 5, id="console-sink-key"),
    ],
)
def test_a_documented_key_the_file_leaves_out_is_overridden_plainly(
    jobs: Path, job: str, override: str, key: str, value: Any
) -> None:
    code, composed_job = composed(f"job={job}", override)
    assert code == 0
    assert at(composed_job, key) == value


def test_only_the_file_and_the_overrides_reach_the_job(jobs: Path) -> None:
    code, job = composed("job=t/flights", "job.sources.flights.lookback=0", "job.publish.max_attempts=5")
    assert code == 0
    assert job["sources"]["flights"] == {
        "type": "files",
        "format": "json",
        "path": "in/*.json",
        "schema": "id BIGINT",
        "lookback": 0,
    }
    assert job["publish"] == {"max_attempts": 5}  # `policy` stays unset: a DAG-level one still inherits
    assert set(job) == {"sources", "converters", "sinks", "publish"}


def test_changing_a_plugins_type_drops_the_old_types_defaults(jobs: Path) -> None:
    """The defaults filled in are the file's type's; a type changed on the command line gets its
    own keys with ``+``."""
    code, job = composed(
        "job=t/flights",
        "job.sources.flights.type=delta",
        "~job.sources.flights.format",
        "~job.sources.flights.schema",
        "+job.sources.flights.changes=cdf",
    )
    assert code == 0
    assert job["sources"]["flights"] == {"type": "delta", "path": "in/*.json", "changes": "cdf"}


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        pytest.param(
            "job.sources.flights.lookbak=0",
            "unknown key `job.sources.flights.lookbak`: did you mean `job.sources.flights.lookback`?",
            id="misspelt-source-key",
        ),
        pytest.param("job.sinks.lake.rows=5", "unknown key `job.sinks.lake.rows`: (", id="another-plugins-key"),
        pytest.param(
            "job.sinks.lake.options.mergeSchema=true",
            "unknown key `job.sinks.lake.options.mergeSchema`: (",
            id="a-free-form-option",
        ),
    ],
)
def test_a_key_no_documentation_has_is_still_refused_naming_it(
    jobs: Path, override: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = composed("job=t/flights", override)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("config error: ") and err.count("\n") == 1, err  # one line, not Hydra's five
    assert needle in err and f"`+{override}`" in err  # and how to add it anyway


def test_plus_still_adds_an_undocumented_key(jobs: Path) -> None:
    code, job = composed("job=t/flights", "+job.sinks.lake.options.mergeSchema=true")
    assert code == 0
    assert job["sinks"]["lake"]["options"] == {"mergeSchema": True}


def test_cfg_job_shows_the_file_and_the_overrides_only(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = compose_and_run(["--cfg", "job", "job=t/flights", "job.sources.flights.lookback=0"], lambda app: 99)
    out = capsys.readouterr().out
    assert code == 0
    assert "lookback: 0" in out
    for default in ("min_age", "incremental", "on_duplicate", "max_attempts", "__documented_defaults__"):
        assert default not in out


DEPS = """
publish.policy = partial
dags {
  d.sources.s { type = files, format = json, path = "in/*.json", schema = "id BIGINT" }
  d.sinks.lake { type = delta, path = a }
  mirror.copy { source = in, target = mirror }
}
"""


def compiled_dags(jobs: Path, *overrides: str) -> dict[str, Any]:
    (jobs / "t" / "deps.conf").write_text(DEPS)
    code, job = composed("job=t/deps", *overrides)
    assert code == 0
    spec = compile_job(job, name="deps", file=str(jobs / "t" / "deps.conf"), warehouse=str(jobs / "lake"))
    return {d.name: d for d in spec.dags}


@pytest.mark.parametrize(
    ("overrides", "dag", "policy", "attempts"),
    [
        pytest.param(["job.dags.d.publish.policy=full"], "d", "full", 3, id="dag-policy-equal-to-the-default"),
        pytest.param(["job.dags.d.publish.max_attempts=5"], "d", "partial", 5, id="dag-key-keeps-the-jobs-policy"),
        pytest.param([], "d", "partial", 3, id="dag-inherits-the-jobs-policy"),
        pytest.param(["job.dags.mirror.publish.policy=full"], "mirror", "full", 3, id="copy-policy-full"),
        pytest.param(["job.dags.mirror.publish.max_attempts=5"], "mirror", "partial", 5, id="copy-keeps-partial"),
        pytest.param(["job.publish.policy=full"], "mirror", "full", 3, id="copy-inherits-the-jobs-policy"),
    ],
)
def test_an_override_equal_to_the_default_still_overrides(
    jobs: Path, overrides: list[str], dag: str, policy: str, attempts: int
) -> None:
    publish = compiled_dags(jobs, *overrides)[dag].publish
    assert (publish.policy, publish.max_attempts) == (policy, attempts)


def test_a_named_default_reaches_the_job_and_its_siblings_do_not(jobs: Path) -> None:
    (jobs / "t" / "deps.conf").write_text(DEPS)
    code, job = composed("job=t/deps", "job.dags.d.publish.policy=full", "job.dags.mirror.publish.max_attempts=5")
    assert code == 0
    assert job["dags"]["d"]["publish"] == {"policy": "full"}
    assert job["dags"]["mirror"]["publish"] == {"max_attempts": 5}


def test_cfg_job_shows_an_override_equal_to_the_default(jobs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (jobs / "t" / "deps.conf").write_text(DEPS)
    code = compose_and_run(["--cfg", "job", "job=t/deps", "job.dags.d.publish.policy=full"], lambda app: 99)
    out = capsys.readouterr().out
    assert code == 0
    assert "policy: full" in out and "max_attempts" not in out
