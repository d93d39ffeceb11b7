"""Compiling jobs: every config mistake is one ConfigError naming the key and the file. No JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from tests.helpers import compile_dict


def job(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sources": {"orders": {"type": "files", "format": "json", "path": "in/*.json"}},
        "converters": [{"type": "require", "columns": ["id"]}],
        "forks": {"big": "amount > 10"},
        "sinks": {"lake": {"type": "delta", "path": "orders", "from": "valid"}},
    }
    base.update(over)
    return base


def compile_error(raw: dict[str, Any], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "orders.conf")
    return info.value


def test_a_valid_job_compiles_with_resolved_paths(tmp_path: Path) -> None:
    spec = compile_dict(job(), tmp_path / "lake", file=tmp_path / "jobs" / "orders.conf")
    (dag,) = spec.dags
    assert dag.source.conf.paths() == [str(tmp_path / "jobs" / "in" / "*.json")]  # type: ignore[attr-defined]
    assert dag.sinks[0].conf.path == f"{tmp_path / 'lake'}/orders"  # type: ignore[attr-defined]
    assert dag.error_table == f"{tmp_path / 'lake'}/_errors/t"
    assert [s.name for s in dag.steps] == ["require"]


@pytest.mark.parametrize(
    ("raw", "key", "needle"),
    [
        pytest.param(
            job(sinks={"lake": {"type": "delat", "path": "x"}}),
            "job.sinks.lake.type",
            "unknown sink type `delat`; did you mean `delta`?",
            id="unknown-sink-type",
        ),
        pytest.param(
            job(converters=[{"type": "cats", "columns": {"a": "int"}}]),
            "job.converters[0].type",
            "did you mean `cast`?",
            id="unknown-converter-type",
        ),
        pytest.param(
            job(sinks={"lake": {"type": "delta", "path": "x", "partiton_by": ["d"]}}),
            "job.sinks.lake.partiton_by",
            "unknown key (did you mean `partition_by`?)",
            id="unknown-sink-key",
        ),
        pytest.param(
            job(sinks={"lake": {"type": "delta"}}),
            "job.sinks.lake.path",
            "missing required key",
            id="missing-sink-path",
        ),
        pytest.param(
            job(sinks={"lake": {"type": "delta", "path": "x", "from": "bg"}}),
            "job.sinks.lake.from",
            "reads from branch `bg`, which no fork defines; did you mean `big`?",
            id="from-names-no-branch",
        ),
        pytest.param(
            job(sources={"o": {"type": "files", "format": "xml", "path": "x"}}),
            "job.sources.o.format",
            "Input should be 'json', 'csv', 'parquet', 'avro' or 'text'",
            id="bad-format",
        ),
        pytest.param(job(sinks={}), "job.sinks", "missing required key", id="no-sinks"),
        pytest.param(
            job(forks={"valid": "true"}), "job.forks.valid", "`valid` is a built-in branch", id="fork-named-valid"
        ),
        pytest.param(
            job(
                converters=[
                    {"type": "check", "expr": "a > 0", "name": "x"},
                    {"type": "require", "columns": ["b"], "name": "x"},
                ]
            ),
            "job.converters",
            "two converter steps are named `x`",
            id="duplicate-step-names",
        ),
        pytest.param(
            job(converters=[{"type": "check", "expr": "a > 0"}, {"type": "expect", "expr": "b > 0", "name": "read"}]),
            "job.converters[1]",
            "may not be named `read`",
            id="step-named-read",
        ),
        pytest.param(job(parallelism=0), "job.parallelism", "greater than or equal to 1", id="parallelism-0"),
        pytest.param(
            {"dags": {"a": job()}, "sources": job()["sources"]},
            "job.dags",
            "keeps sources, converters, forks and sinks inside each DAG",
            id="dags-and-top-level",
        ),
        pytest.param(
            {"dags": {"a": job(sinks={"s": {"type": "console", "from": "nope"}})}},
            "job.dags.a.sinks.s.from",
            "which no fork defines",
            id="dag-key-path",
        ),
    ],
)
def test_config_mistakes_name_key_and_file(raw: dict[str, Any], key: str, needle: str, tmp_path: Path) -> None:
    err = compile_error(raw, tmp_path)
    assert err.key == key
    assert err.file == str(tmp_path / "jobs" / "orders.conf")
    assert needle in str(err)


def test_malformed_avro_schema_names_the_schema_file(tmp_path: Path) -> None:
    avsc = tmp_path / "jobs" / "bad.avsc"
    avsc.parent.mkdir(parents=True)
    avsc.write_text(json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "strng"}]}))
    src = {"type": "files", "format": "json", "path": "x", "schema": "bad.avsc"}
    err = compile_error(job(sources={"o": src}), tmp_path)
    assert err.key == "job.sources.o.schema"
    assert err.file == str(avsc)
    assert "unknown type `strng`" in str(err)


def test_missing_schema_file_is_a_config_error(tmp_path: Path) -> None:
    src = {"type": "files", "format": "json", "path": "x", "schema": "nope.avsc"}
    err = compile_error(job(sources={"o": src}), tmp_path)
    assert "cannot read Avro schema" in str(err)


def test_several_dags_compile_with_their_own_key_paths(tmp_path: Path) -> None:
    other = job(sinks={"lake": {"type": "delta", "path": "returns"}})  # two DAGs never write one place
    spec = compile_dict({"name": "shop", "dags": {"a": job(), "b": other}}, tmp_path)
    assert [d.name for d in spec.dags] == ["a", "b"]
    assert spec.dags[1].key == "job.dags.b"
    assert spec.name == "shop"


def test_compiling_needs_no_jvm() -> None:
    import subprocess
    import sys

    code = "import sys, engine.spec, engine.cli; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def files_dag(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "sources": {"s": {"type": "files", "format": "json", "path": "in/*.json", "schema": "id BIGINT"}},
        "sinks": {"lake": {"type": "delta", "path": "a"}},
    }
    return {**raw, **over}


@pytest.mark.parametrize(
    ("shared", "dag", "expected"),
    [
        pytest.param(
            {"publish": {"policy": "partial"}},
            files_dag(publish={"max_attempts": 5}),
            ("partial", 5, 8),
            id="a-dag-publish-key-keeps-the-jobs-policy",
        ),
        pytest.param(
            {"publish": {"policy": "partial"}},
            files_dag(publish={"policy": "full"}),
            ("full", 3, 8),
            id="a-dag-policy-equal-to-the-default-wins",
        ),
        pytest.param(
            {"work_units": {"max_groups": 2}},
            files_dag(work_units={"parallelism": 4}),
            ("full", 3, 2),
            id="a-dag-work-units-key-keeps-the-jobs-others",
        ),
        pytest.param(
            {"publish": {"max_attempts": 5}},
            {"copy": {"source": "in", "target": "out"}},
            ("partial", 5, 8),
            id="a-copy-dag-under-a-job-publish-key-stays-partial",
        ),
        pytest.param(
            {},
            {"copy": {"source": "in", "target": "out"}, "publish": {"max_attempts": 5}},
            ("partial", 5, 8),
            id="a-copy-dag-publish-key-stays-partial",
        ),
    ],
)
def test_a_dag_inherits_the_job_level_policies_key_by_key(
    tmp_path: Path, shared: dict[str, Any], dag: dict[str, Any], expected: tuple[str, int, int]
) -> None:
    spec = compile_dict({**shared, "dags": {"d": dag}}, tmp_path / "lake", file=tmp_path / "jobs" / "t.conf")
    (d,) = spec.dags
    groups = d.work_units.max_groups if hasattr(d, "work_units") else 8
    assert (d.publish.policy, d.publish.max_attempts, groups) == expected
