"""The compiler asks plugins through hooks, so a new plugin needs no change to the compiler: its
paths resolved, its writes checked against the engine's places, its upstream inputs found. No JVM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from engine.cli.rewind_effects import UNKNOWN, advice, sink_replays
from engine.errors import ConfigError
from engine.plugins import Anchors, PluginEntry
from engine.sinks import SINKS
from engine.sinks.conf import DeltaSinkConf, FilesSinkConf, SinkConf
from engine.sources import SOURCES
from engine.sources.conf import DeltaSourceConf, FilesSourceConf, JdbcSourceConf, SourceConf
from engine.spec.places import made_upstream
from tests.helpers import compile_dict


class FolderSourceConf(SourceConf):
    """A third party's source reading a folder next to the job file."""

    type: Literal["folder"] = "folder"
    folder: str

    def resolved(self, anchors: Anchors) -> FolderSourceConf:
        return self.model_copy(update={"folder": anchors.from_job_file(self.folder)})

    def inputs(self) -> dict[str, str]:
        return {self.folder: self.folder}


class MirrorSinkConf(SinkConf):
    """A third party's sink writing two places under the warehouse."""

    type: Literal["mirror"] = "mirror"
    main: str
    copy_to: str

    def resolved(self, anchors: Anchors) -> MirrorSinkConf:
        update = {"main": anchors.under_warehouse(self.main), "copy_to": anchors.under_warehouse(self.copy_to)}
        return self.model_copy(update=update)

    def writes(self) -> dict[str, str]:
        return {"main": self.main, "copy_to": self.copy_to}


@pytest.fixture(autouse=True)
def third_party() -> Iterator[None]:
    SOURCES.register("folder", PluginEntry(FolderSourceConf, "tests.nowhere:FolderSource"))
    SINKS.register("mirror", PluginEntry(MirrorSinkConf, "tests.nowhere:MirrorSink"))
    yield
    SOURCES._entries.pop("folder")
    SINKS._entries.pop("mirror")


def dag(sink: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {"sources": {"in": {"type": "folder", "folder": "data"}}, "sinks": {"out": sink}, **over}


def test_a_new_plugin_resolves_its_own_paths(tmp_path: Path) -> None:
    spec = compile_dict(
        dag({"type": "mirror", "main": "a", "copy_to": "/abs/b"}), tmp_path / "lake", file=tmp_path / "j.conf"
    )
    (d,) = spec.dags
    assert d.source.conf.folder == str(tmp_path / "data")  # type: ignore[attr-defined]
    assert (d.sinks[0].conf.main, d.sinks[0].conf.copy_to) == (f"{tmp_path / 'lake'}/a", "/abs/b")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("path", "from_job_file", "under_warehouse"),
    [
        pytest.param("data", "{base}/data", "{lake}/data", id="relative"),
        pytest.param("/abs/./b/", "/abs/./b/", "/abs/./b/", id="absolute-as-written"),
        pytest.param("file:/abs/b", "file:/abs/b", "file:/abs/b", id="file-hadoop-form"),
        pytest.param("file:///abs/b", "file:///abs/b", "file:///abs/b", id="file-url"),
        pytest.param("s3a://b/k/", "s3a://b/k/", "s3a://b/k/", id="s3"),
    ],
)
def test_anchors_make_only_relative_paths_absolute(
    tmp_path: Path, path: str, from_job_file: str, under_warehouse: str
) -> None:
    anchors = Anchors(base_dir=tmp_path, warehouse=f"{tmp_path}/lake/")
    expected = (from_job_file.format(base=tmp_path), under_warehouse.format(lake=tmp_path / "lake"))
    assert (anchors.from_job_file(path), anchors.under_warehouse(path)) == expected


def test_what_a_new_sink_writes_is_checked_against_the_engines_places(tmp_path: Path) -> None:
    raw = dag({"type": "mirror", "main": "a", "copy_to": "_engine/x"})
    with pytest.raises(ConfigError, match=r"the sink copy_to .* overlaps the engine's metadata") as info:
        compile_dict(raw, tmp_path / "lake", file=tmp_path / "j.conf")
    assert info.value.key == "job.sinks.out.copy_to"


def test_a_new_source_reading_what_an_upstream_sink_writes_waits_for_it(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    raw = {
        "dags": {
            "up": dag({"type": "mirror", "main": "a", "copy_to": str(tmp_path / "data")}),
            "down": {**dag({"type": "console"}), "after": ["up"]},
        }
    }
    spec = compile_dict(raw, lake, file=tmp_path / "j.conf")
    down = next(d for d in spec.dags if d.name == "down")
    assert made_upstream(spec, down) == frozenset({str(tmp_path / "data")})


@pytest.mark.parametrize(
    ("conf", "infers"),
    [
        pytest.param(FilesSourceConf(type="files", path="/x", format="json"), True, id="json-without-schema"),
        pytest.param(FilesSourceConf(type="files", path="/x", format="csv", schema="a INT"), False, id="csv-declared"),
        pytest.param(FilesSourceConf(type="files", path="/x", format="parquet"), False, id="parquet"),
        pytest.param(DeltaSourceConf(path="/t"), False, id="delta"),
        pytest.param(JdbcSourceConf(url="jdbc:x", table="t"), False, id="jdbc"),
    ],
)
def test_which_sources_infer_their_schema_while_planning(conf: SourceConf, infers: bool) -> None:
    assert conf.infers_schema is infers


@pytest.mark.parametrize(
    ("conf", "stages"),
    [
        pytest.param(DeltaSinkConf(type="delta", path="/t", mode="overwrite"), True, id="delta-overwrite"),
        pytest.param(DeltaSinkConf(type="delta", path="/t"), False, id="delta-append"),
        pytest.param(FilesSinkConf(type="csv", path="/t", mode="overwrite"), True, id="files-overwrite"),
        pytest.param(FilesSinkConf(type="parquet", path="/t"), False, id="files-append"),
    ],
)
def test_only_an_overwrite_stages_an_empty_branch(conf: SinkConf, stages: bool) -> None:
    assert conf.stages_empty is stages


def test_every_table_sink_type_keeps_its_registry_entry() -> None:
    kinds = {name: SINKS.get(name).conf for name in ("delta", "parquet", "avro", "json", "csv")}
    assert kinds == {"delta": DeltaSinkConf, **{n: FilesSinkConf for n in ("parquet", "avro", "json", "csv")}}
    with pytest.raises(ValueError, match="mode `merge` needs a Delta sink, not `parquet`"):
        FilesSinkConf(type="parquet", path="/t", mode="merge", keys=["id"])


def test_a_new_sink_says_what_a_replay_does_to_it_without_the_cli_knowing_it(tmp_path: Path) -> None:
    raw = dag({"type": "mirror", "main": "a", "copy_to": "b"})
    (d,) = compile_dict(raw, tmp_path / "lake", file=tmp_path / "j.conf").dags
    (said, _errors) = sink_replays(d)
    assert (said.name, said.what, said.effect) == ("sink `out`", "mirror", UNKNOWN)
    assert "duplicates unless it is idempotent" in said.why
    assert advice([said]).startswith("sink `out` will hold the re-read records twice")
