"""Fan-out: a DAG template expanded per dataset, dependencies and pools checked. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.spec.fanout import Found
from tests.helpers import compile_dict


def template(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sources": {"s": {"type": "files", "format": "json", "path": "/in/{dataset}/*.json", "schema": "id BIGINT"}},
        "converters": [
            {"type": "derive", "columns": {"origin": "'{dataset}'", "n": "regexp_extract(id, '\\d{2}', 0)"}}
        ],
        "sinks": {"lake": {"type": "delta", "path": "lake/{dataset}"}},
    }
    base.update(over)
    return base


def dag(path: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sources": {"s": {"type": "files", "format": "json", "path": path, "schema": "id BIGINT"}},
        "sinks": {"lake": {"type": "delta", "path": "x"}},
    }
    base.update(over)
    return base


def test_a_listed_fan_out_gives_one_dag_per_dataset_with_its_values(tmp_path: Path) -> None:
    raw = {"fan_out": {"datasets": ["orders", "customers", "tmp_x"], "exclude": "^tmp_", "template": template()}}
    spec = compile_dict(raw, tmp_path / "lake")
    assert [d.name for d in spec.dags] == ["customers", "orders"]  # sorted, tmp_x excluded
    orders = spec.dags[1]
    assert orders.dataset == "orders"
    assert orders.source.conf.paths() == ["/in/orders/*.json"]  # type: ignore[attr-defined]
    assert orders.sinks[0].conf.path == f"{tmp_path / 'lake'}/lake/orders"  # type: ignore[attr-defined]
    derive = orders.steps[0].conf.columns  # type: ignore[attr-defined]
    assert derive == {"origin": "'orders'", "n": "regexp_extract(id, '\\d{2}', 0)"}  # a regex's {2} is left alone
    assert spec.discover is None


def test_fan_out_dags_join_explicit_dags_and_inherit_job_defaults(tmp_path: Path) -> None:
    raw = {
        "publish": {"policy": "partial"},
        "dags": {"setup": dag("/in/setup/*.json")},
        "fan_out": {"datasets": ["a"], "name": "load_{dataset}", "template": template(after=["setup"], priority=3)},
    }
    spec = compile_dict(raw, tmp_path / "lake")
    setup, load = spec.dags
    assert (load.name, load.after, load.priority, load.publish.policy) == ("load_a", ("setup",), 3, "partial")
    assert (setup.pool_name, load.pool_name) == ("setup", "load_a")


def test_a_discovered_fan_out_compiles_an_example_until_the_datasets_are_found(tmp_path: Path) -> None:
    job_file = tmp_path / "jobs" / "landing.conf"
    tpl = template(sources={"s": {"type": "files", "format": "json", "path": "{path}/*.json", "schema": "id BIGINT"}})
    raw = {"fan_out": {"discover": {"type": "glob", "path": "landing/*"}, "template": tpl}}
    spec = compile_dict(raw, tmp_path / "lake", file=job_file)
    assert spec.discover is not None and spec.discover.path == str(tmp_path / "jobs" / "landing" / "*")
    assert [d.name for d in spec.dags] == ["example"]
    found = [Found("b", {"path": "/data/b"}), Found("a", {"path": "/data/a"})]
    from engine.spec import compile_job

    spec = compile_job(raw, name="t", file=str(job_file), warehouse=str(tmp_path / "lake"), found=found)
    assert spec.discover is None
    assert [(d.name, d.source.conf.paths()) for d in spec.dags] == [  # type: ignore[attr-defined]
        ("a", ["/data/a/*.json"]),
        ("b", ["/data/b/*.json"]),
    ]


@pytest.mark.parametrize(
    ("raw", "key", "needle"),
    [
        pytest.param(
            {"fan_out": {"datasets": ["a"], "template": template(sinks={"l": {"type": "delta", "path": "{table}"}})}},
            "job.fan_out.template.sinks.l.path",
            "unknown placeholder `{table}`; this fan-out defines {dataset}",
            id="placeholder-the-listing-does-not-define",
        ),
        pytest.param(
            {"fan_out": {"datasets": [], "template": template()}},
            "job.fan_out",
            "give exactly one of `datasets` and `discover`",
            id="neither-listed-nor-discovered",
        ),
        pytest.param(
            {"fan_out": {"datasets": ["a"], "include": "^b", "template": template()}},
            "job.fan_out",
            "gave no dataset",
            id="nothing-left-after-include",
        ),
        pytest.param(
            {"fan_out": {"datasets": ["a"], "include": "(", "template": template()}},
            "job.fan_out.include",
            "not a regular expression",
            id="bad-include-regex",
        ),
        pytest.param(
            {"dags": {"a": dag("/x")}, "fan_out": {"datasets": ["a"], "template": template()}},
            "job.fan_out.name",
            "already taken",
            id="fan-out-name-collides-with-a-dag",
        ),
        pytest.param(
            {"fan_out": {"datasets": ["a"], "template": template(sinks={"l": {"type": "delat", "path": "x"}})}},
            "job.fan_out.template.sinks.l.type",
            "did you mean `delta`?",
            id="template-mistake-named-in-the-template",
        ),
        pytest.param(
            {"dags": {"a": dag("/a", after=["c"]), "b": dag("/b")}},
            "job.dags.a.after",
            "`c` is not a DAG of this job",
            id="unknown-upstream",
        ),
        pytest.param(
            {"dags": {"a": dag("/a", after=["b"]), "b": dag("/b", after=["a"])}},
            "job.dags",
            "cycle",
            id="dependency-cycle",
        ),
        pytest.param(
            {"pools": {"big pool": {"weight": 2}}, "dags": {"a": dag("/a")}},
            "job.pools.big pool",
            "pool name",
            id="pool-name-with-a-space",
        ),
        pytest.param(
            {"pools": {"big": {"weight": 0}}, "dags": {"a": dag("/a")}},
            "job.pools.big.weight",
            "greater than or equal to 1",
            id="pool-weight-zero",
        ),
    ],
)
def test_fan_out_dependency_and_pool_mistakes_name_the_key(
    raw: dict[str, Any], key: str, needle: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "j.conf")
    assert needle in info.value.message
    assert info.value.key is not None and info.value.key.startswith(key)
    assert info.value.file == str(tmp_path / "jobs" / "j.conf")
