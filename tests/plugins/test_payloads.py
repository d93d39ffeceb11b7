"""Stored plans decode only the payload classes plugins registered. No JVM."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from engine.commit import plan_codec
from engine.errors import EXIT_JOB_FAILED, EngineError
from engine.plugins import PAYLOADS, PayloadClasses, PluginConf, PluginEntry, Registry, UnknownPayloadError
from engine.sources import SOURCES
from engine.sources.delta import Range
from engine.sources.file_listing import FileEntry
from engine.sources.workunits import Size, WorkUnit
from engine.state.watermarks import LongWatermark


@dataclass(frozen=True)
class Slice:
    """A third party's payload."""

    start: int
    end: int


class SliceConf(PluginConf):
    type: str = "sliced"


def roundtrip(value: Any) -> Any:
    return plan_codec.decode(json.loads(json.dumps(plan_codec.encode(value))))


def test_the_built_in_payloads_round_trip() -> None:
    unit = WorkUnit("files:/in", None, LongWatermark(3), size=Size(files=1), payload=[FileEntry("file:/a", 1, 2, "d")])
    delta = WorkUnit("delta:/t", None, LongWatermark(7), payload=Range("appends", 4, 7, ("p.parquet",)))
    assert roundtrip([unit, delta]) == [unit, delta]


def test_a_plan_stored_before_the_files_source_split_still_decodes() -> None:
    stored = {
        "$dc": "engine.sources.files:FileEntry",
        "f": {"path": "file:/a", "size": 1, "mtime_ms": 2, "dataset": "d"},
    }
    assert plan_codec.decode(stored) == FileEntry("file:/a", 1, 2, "d")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("os:PathLike", id="outside-the-engine"),
        pytest.param("engine.sources.conf:FilesSourceConf", id="an-engine-class-no-plugin-registered"),
        pytest.param(f"{__name__}:Unregistered", id="unregistered-third-party"),
    ],
)
def test_a_plan_naming_an_unregistered_class_is_refused(name: str) -> None:
    with pytest.raises(UnknownPayloadError, match=f"names class {name}, which no plugin registered"):
        plan_codec.decode({"$dc": name, "f": {}})


def test_a_plugin_registered_with_its_payloads_has_them_decoded() -> None:
    registry: Registry[SliceConf, object] = Registry("thing", {})
    registry.register("sliced", PluginEntry(SliceConf, f"{__name__}:Slice", payloads=(f"{__name__}:Slice",)))
    assert roundtrip(WorkUnit("s", None, None, payload=Slice(1, 2))).payload == Slice(1, 2)


def test_registering_a_class_by_itself_and_by_a_former_name() -> None:
    payloads = PayloadClasses()
    payloads.register_class(Slice)
    payloads.register(f"{__name__}:Slice", formerly=("old.module:Slice",))
    assert payloads.resolve("old.module:Slice") is Slice
    assert payloads.resolve(f"{__name__}:Slice") is Slice
    assert f"{__name__}:Slice" in payloads.names()


def test_every_builtin_source_registry_entry_registers_its_payloads() -> None:
    for name in SOURCES.names():
        for path in SOURCES.get(name).payloads:
            assert PAYLOADS.resolve(path).__name__ == path.rsplit(":", 1)[1]


class SlicedSource:
    """A third party's implementation as its entry point names it."""

    Conf = SliceConf
    Payloads = (Slice,)


class FakeEntryPoint:
    name = "sliced"
    value = f"{__name__}:SlicedSource"

    def load(self) -> type[SlicedSource]:
        return SlicedSource


def test_an_entry_point_plugin_registers_its_own_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        seen.append(group)
        return [FakeEntryPoint()]

    monkeypatch.setattr("engine.plugins.registry.entry_points", entry_points)
    payloads = PayloadClasses()
    monkeypatch.setattr("engine.plugins.registry.PAYLOADS", payloads)
    registry: Registry[SliceConf, SlicedSource] = Registry("source", {})
    assert registry.get("sliced").load() is SlicedSource
    assert seen == ["engine.sources"]
    assert payloads.resolve(f"{__name__}:Slice") is Slice


def test_a_moved_class_is_stored_under_its_former_name_for_older_engines() -> None:
    """An engine rolled back to before the files source split imports `engine.sources.files`."""
    stored = plan_codec.encode(FileEntry("file:/a", 1, 2, "d"))
    assert stored["$dc"] == "engine.sources.files:FileEntry"
    assert plan_codec.decode(stored) == FileEntry("file:/a", 1, 2, "d")


def test_a_plugin_reusing_a_moved_class_keeps_its_former_stored_name() -> None:
    """A files-like plugin declaring the built-in FileEntry must not make new plans unreadable to an
    engine from before the move."""
    payloads = PayloadClasses()
    payloads.register(f"{__name__}:Slice", formerly=("old.module:Slice",))
    payloads.register(f"{__name__}:Slice")
    assert payloads.stored_as(f"{__name__}:Slice") == "old.module:Slice"
    assert payloads.resolve("old.module:Slice") is Slice


def test_an_unknown_payload_is_an_engine_error_that_fails_the_run() -> None:
    with pytest.raises(EngineError) as caught:
        plan_codec.decode({"$dc": "os:PathLike", "f": {}})
    assert caught.value.exit_code == EXIT_JOB_FAILED and not caught.value.transient
