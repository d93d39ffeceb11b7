"""Compiling copy jobs: paths resolved against the job file, defaults filled in, and every config
mistake one ConfigError naming the key path. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.spec.copy import CopyDagSpec
from tests.helpers import compile_dict


def compiled(copy: dict[str, Any], tmp_path: Path, **job: Any) -> Any:
    return compile_dict({"copy": copy, **job}, tmp_path / "lake", file=tmp_path / "jobs" / "mirror.conf")


def error(raw: dict[str, Any], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "mirror.conf")
    return info.value


def test_a_copy_job_compiles_with_resolved_paths_and_defaults(tmp_path: Path) -> None:
    spec = compiled({"source": "landing", "target": "s3://bucket/mirror"}, tmp_path)
    (dag,) = spec.dags
    assert isinstance(dag, CopyDagSpec)
    assert dag.copy.source == str(tmp_path / "jobs" / "landing")
    assert dag.copy.target == "s3://bucket/mirror"
    assert dag.copy.file_set == "dataset"
    assert dag.publish.policy == "partial", "file sets publish on their own unless the job says full"
    assert dag.events_dir == f"{tmp_path / 'lake'}/_engine/copy_events/t"
    assert dag.copy.tasks.buffer_size == 1 << 20 and dag.copy.split.block_size == 128 << 20


def test_date_partitioned_datasets_default_to_a_file_set_per_partition(tmp_path: Path) -> None:
    spec = compiled(
        {"source": "a", "target": "b", "datasets": {"type": "date_partitioned", "layout": "dt=yyyy-MM-dd"}}, tmp_path
    )
    assert spec.dags[0].copy.file_set == "partition"


def test_copy_dags_mix_with_record_dags_and_fan_out(tmp_path: Path) -> None:
    raw = {
        "dags": {"land": {"copy": {"source": "in", "target": "landed"}}},
        "fan_out": {
            "datasets": ["x", "y"],
            "template": {"after": ["land"], "copy": {"source": "in/{dataset}", "target": "out/{dataset}"}},
        },
    }
    spec = compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "m.conf")
    assert [d.name for d in spec.dags] == ["land", "x", "y"]
    assert spec.dags[2].copy.target == str(tmp_path / "jobs" / "out" / "y")
    assert spec.dags[2].after == ("land",)


@pytest.mark.parametrize(
    ("copy", "extra", "key", "words"),
    [
        ({"target": "b"}, {}, "job.copy.source", "missing required key"),
        ({"source": "a", "target": "b", "datasets": {"type": "globb"}}, {}, "job.copy.datasets", "globb"),
        ({"source": "a", "target": "b", "file_set": "partition"}, {}, "job.copy.file_set", "date_partitioned"),
        (
            {"source": "a", "target": "b", "transforms": [{"type": "gzip"}], "split": {"enabled": True}},
            {},
            "job.copy.split",
            "plain copy",
        ),
        (
            {"source": "a", "target": "s3://b/x", "attributes": {"owner": "etl"}},
            {},
            "job.copy.attributes.owner",
            "local target",
        ),
        (
            {"source": "a", "target": "b", "attributes": {"permissions": "rw-r--r--"}},
            {},
            "job.copy.attributes.permissions",
            "octal",
        ),
        (
            {"source": "a", "target": "b", "tasks": {"buffer_sise": "1m"}},
            {},
            "job.copy.tasks.buffer_sise",
            "buffer_size",
        ),
        (
            {"source": "a", "target": "b", "transforms": [{"type": "untar"}, {"type": "unzip"}]},
            {},
            "job.copy.transforms[1]",
            "unpack",
        ),
        ({"source": "a", "target": "b"}, {"sinks": {"x": {"type": "console"}}}, "job.copy", "no `sinks`"),
        (
            {"source": "a", "target": "b", "datasets": {"type": "date_partitioned", "layout": "MM/dd"}},
            {},
            "job.copy.datasets",
            "yyyy",
        ),
        (
            {"source": "a", "target": "b", "datasets": {"type": "glob", "pattern": "*", "match": "all"}},
            {},
            "job.copy.datasets",
            "directories",
        ),
        ({"source": "a", "target": "a/mirror"}, {}, "job.copy.target", "overlap"),
        ({"source": "in/a", "target": "in"}, {}, "job.copy.target", "overlap"),
        ({"source": "s3a://b/in", "target": "s3://b/in/out"}, {}, "job.copy.target", "overlap"),
        ({"source": "a", "target": "../lake"}, {}, "job.copy.target", "metadata"),
    ],
)
def test_copy_config_mistakes_name_their_key(
    copy: dict[str, Any], extra: dict[str, Any], key: str, words: str, tmp_path: Path
) -> None:
    err = error({"copy": copy, **extra}, tmp_path)
    assert err.key is not None and err.key.startswith(key), (err.key, err.message)
    assert words in err.message, err.message
    assert err.file == str(tmp_path / "jobs" / "mirror.conf")


def test_decryption_keys_never_appear_in_errors_or_the_spec_repr(tmp_path: Path) -> None:
    from engine.copy.age_encryption import generate_identity

    secret, public = generate_identity()
    spec = compiled(
        {"source": "a", "target": "b", "transforms": [{"type": "decrypt", "identities": [secret]}]}, tmp_path
    )
    assert secret not in repr(spec)
    err = error(
        {"copy": {"source": "a", "target": "b", "transforms": [{"type": "decrypt", "identities": [secret[:-3]]}]}},
        tmp_path,
    )
    assert secret[:-3] not in err.message and secret[:-3] not in str(err)
    assert public.startswith("age1")


def test_copy_dags_sharing_a_target_or_deleting_around_one_are_refused(tmp_path: Path) -> None:
    def dags(second_target: str, delete: bool) -> dict[str, Any]:
        first = {"source": "a", "target": "out", "delete": {"enabled": delete}}
        return {"dags": {"one": {"copy": first}, "two": {"copy": {"source": "b", "target": second_target}}}}

    same = error(dags("out", False), tmp_path)
    assert same.key == "job.dags.two.copy.target" and "`one` and `two` have the same target" in same.message
    nested = error(dags("out/b", True), tmp_path)
    assert "nested targets, and `one` propagates deletions" in nested.message, nested.message
    outer_first = {
        "dags": {
            "one": {"copy": {"source": "a", "target": "out"}},
            "two": {"copy": {"source": "b", "target": "out/b", "delete": {"enabled": True}}},
        }
    }
    assert "`two` propagates deletions" in error(outer_first, tmp_path).message, "the inner one deleting counts too"
    spec = compile_dict(dags("out/b", False), tmp_path / "lake", file=tmp_path / "jobs" / "mirror.conf")
    assert [d.name for d in spec.dags] == ["one", "two"], "nested targets without deletions are fine"
