"""The places the engine reserves are refused as outputs when a job compiles (so at validation,
before anything is written), and a dependent DAG knows which inputs its upstreams write. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.spec.places import made_upstream
from tests.helpers import compile_dict


def one_dag(sink: str, **over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "sources": {"s": {"type": "files", "format": "json", "path": "in/*.json", "schema": "id BIGINT"}},
        "sinks": {"lake": {"type": "delta", "path": sink}},
    }
    raw.update(over)
    return raw


def refused(raw: dict[str, Any], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_dict(raw, tmp_path / "lake", file=tmp_path / "jobs" / "t.conf")
    return info.value


@pytest.mark.parametrize(
    ("sink", "needle"),
    [
        pytest.param("_engine/state", "the engine's metadata", id="metadata-table"),
        pytest.param("_engine", "the engine's metadata", id="metadata-root"),
        pytest.param("_engine/commit_log", "the engine's metadata", id="commit-log"),
        pytest.param("orders/../_engine/runs", "the engine's metadata", id="dot-dot-into-metadata"),
        pytest.param("./_engine/./state/", "the engine's metadata", id="dot-segments"),
        pytest.param("{lake}/_engine/state", "the engine's metadata", id="absolute-into-metadata"),
        pytest.param("{lake}/../lake/_engine/leases", "the engine's metadata", id="absolute-with-dot-dot"),
        pytest.param("file://{lake}/_engine/state", "the engine's metadata", id="file-url"),
        pytest.param("file:{lake}/_engine/state", "the engine's metadata", id="file-hadoop-form"),
        pytest.param(".", "the engine's metadata", id="the-warehouse-itself-holds-it"),
        pytest.param("..", "the engine's metadata", id="a-parent-of-the-warehouse"),
        pytest.param("orders/_engine_staging/t.b1", "`_engine_staging`", id="a-staging-dir"),
        pytest.param("{lake}/../elsewhere/_engine_staging", "`_engine_staging`", id="a-staging-dir-outside"),
        pytest.param("orders/_delta_log", "`_delta_log`", id="a-delta-log"),
    ],
)
def test_a_sink_in_a_reserved_place_is_refused_naming_the_sink_key(tmp_path: Path, sink: str, needle: str) -> None:
    error = refused(one_dag(sink.format(lake=tmp_path / "lake")), tmp_path)
    assert error.key == "job.sinks.lake.path"
    assert needle in error.message
    assert error.file == str(tmp_path / "jobs" / "t.conf")


@pytest.mark.parametrize(
    "sink",
    [
        pytest.param("_engine_archive/orders", id="a-name-that-only-starts-like-it"),
        pytest.param("engine/state", id="no-underscore"),
        pytest.param("_errors/other", id="an-error-table-place"),
        pytest.param("s3://bucket/_engine/state", id="another-file-system"),
    ],
)
def test_places_that_only_look_reserved_are_accepted(tmp_path: Path, sink: str) -> None:
    compile_dict(one_dag(sink), tmp_path / "lake", file=tmp_path / "jobs" / "t.conf")


@pytest.mark.parametrize(
    ("raw", "key", "needle"),
    [
        pytest.param(
            one_dag("orders", errors={"path": "_engine/errors"}), "job.errors.path", "metadata", id="error-table"
        ),
        pytest.param(
            {"dags": {"a": one_dag("a"), "b": one_dag("b", errors={"path": "b/_engine_staging"})}},
            "job.dags.b.errors.path",
            "`_engine_staging`",
            id="error-table-of-a-dag",
        ),
        pytest.param(
            {"dags": {"a": one_dag("a"), "b": one_dag("_engine/flow_status")}},
            "job.dags.b.sinks.lake.path",
            "metadata",
            id="sink-of-a-dag",
        ),
        pytest.param(
            {"fan_out": {"datasets": ["x"], "template": one_dag("_engine/{dataset}")}},
            "job.fan_out.template.sinks.lake.path",
            "metadata",
            id="sink-of-a-fan-out",
        ),
        pytest.param(
            {"copy": {"source": "in", "target": "mirror/_engine_staging"}},
            "job.copy.target",
            "`_engine_staging`",
            id="copy-target-in-staging",
        ),
        pytest.param(
            {"copy": {"source": "in", "target": "out", "events": {"path": "{lake}/_engine/state"}}},
            "job.copy.events.path",
            "metadata",
            id="copy-events-set-into-the-metadata",
        ),
    ],
)
def test_error_tables_and_copy_targets_in_reserved_places_are_refused(
    tmp_path: Path, raw: dict[str, Any], key: str, needle: str
) -> None:
    if "copy" in raw and "events" in raw["copy"]:
        raw["copy"]["events"]["path"] = raw["copy"]["events"]["path"].format(lake=tmp_path / "lake")
    error = refused(raw, tmp_path)
    assert error.key == key
    assert needle in error.message


def reader(after: list[str], source: dict[str, Any], sink: str) -> dict[str, Any]:
    return {"after": after, "sources": {"f": source}, "sinks": {"out": {"type": "delta", "path": sink}}}


@pytest.mark.parametrize(
    ("source", "after", "expected"),
    [
        pytest.param({"type": "delta", "path": "landed"}, ["land"], True, id="delta-table-it-writes"),
        pytest.param({"type": "delta", "path": "landed"}, ["mid"], True, id="through-another-upstream"),
        pytest.param({"type": "delta", "path": "{lake}/landed"}, ["land"], True, id="absolute-path"),
        pytest.param({"type": "delta", "path": "_errors/t"}, ["land"], True, id="its-error-table"),
        pytest.param(
            {"type": "files", "format": "parquet", "path": "{lake}/landed/*.parquet"},
            ["land"],
            True,
            id="files-under-it",
        ),
        pytest.param({"type": "delta", "path": "other"}, ["land"], False, id="a-table-nobody-writes"),
        pytest.param({"type": "delta", "path": "landed"}, [], False, id="not-after-the-writer"),
        pytest.param({"type": "delta", "path": "refined"}, ["land"], False, id="a-table-a-non-upstream-writes"),
    ],
)
def test_a_dependent_knows_which_inputs_its_upstreams_write(
    tmp_path: Path, source: dict[str, Any], after: list[str], expected: bool
) -> None:
    lake = tmp_path / "lake"
    source = {k: v.format(lake=lake) if isinstance(v, str) else v for k, v in source.items()}
    raw = {
        "dags": {
            "land": one_dag("landed"),
            "mid": reader(["land"], {"type": "delta", "path": "landed"}, "mid"),
            "dep": reader(after, source, "dep"),
            "refine": reader([], {"type": "delta", "path": "landed"}, "refined"),
        }
    }
    spec = compile_dict(raw, lake, file=tmp_path / "jobs" / "t.conf")
    (dep,) = [d for d in spec.dags if d.name == "dep"]
    assert bool(made_upstream(spec, dep)) is expected


@pytest.mark.parametrize(
    ("paths", "exempt"),
    [
        pytest.param(["{lake}/out/*/"], ["{lake}/out/*/"], id="glob-over-the-upstreams-directories"),
        pytest.param(["{lake}/out"], ["{lake}/out"], id="the-directory-above-the-upstreams-output"),
        pytest.param(["{lake}/out/a/*.parquet"], ["{lake}/out/a/*.parquet"], id="files-inside-the-output"),
        pytest.param(["{lake}/out/a", "{lake}/feed/*.json"], ["{lake}/out/a"], id="only-the-path-an-upstream-writes"),
        pytest.param(["{lake}/outside/*"], [], id="a-sibling-of-the-output"),
    ],
)
def test_a_dependent_may_read_above_or_below_what_an_upstream_writes(
    tmp_path: Path, paths: list[str], exempt: list[str]
) -> None:
    lake = tmp_path / "lake"
    source = {"type": "files", "format": "parquet", "path": [p.format(lake=lake) for p in paths], "schema": "id BIGINT"}
    raw = {"dags": {"land": one_dag("out/a"), "dep": reader(["land"], source, "dep")}}
    spec = compile_dict(raw, lake, file=tmp_path / "jobs" / "t.conf")
    (dep,) = [d for d in spec.dags if d.name == "dep"]
    assert made_upstream(spec, dep) == {p.format(lake=lake) for p in exempt}


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("{tmp}/in/sub", id="plain"),
        pytest.param("file:{tmp}/in/sub", id="file-hadoop-form"),
        pytest.param("file://{tmp}/in/", id="file-url"),
    ],
)
def test_a_copy_target_inside_its_source_is_refused_however_it_is_written(tmp_path: Path, target: str) -> None:
    raw = {"copy": {"source": str(tmp_path / "in"), "target": target.format(tmp=tmp_path)}}
    error = refused(raw, tmp_path)
    assert (error.key, "overlap" in error.message) == ("job.copy.target", True)


def test_the_reserved_names_are_the_ones_the_engine_stages_under() -> None:
    from engine.commit.batch import STAGING_DIR
    from engine.copy.listing import STAGING
    from engine.spec import places

    assert places.STAGING_DIR == STAGING_DIR == STAGING
