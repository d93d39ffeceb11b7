"""Every plugin's documented keys with defaults are listed for a job that leaves them out. No JVM."""

from __future__ import annotations

from typing import Any

import pytest

from engine.converters import CONVERTERS
from engine.plugins import Registry
from engine.sinks import SINKS
from engine.sources import SOURCES
from engine.spec.documented import documented_defaults


@pytest.mark.parametrize(
    ("registry", "where"),
    [
        pytest.param(SOURCES, ("sources", "s"), id="sources"),
        pytest.param(SINKS, ("sinks", "s"), id="sinks"),
        pytest.param(CONVERTERS, ("converters", 0), id="converters"),
    ],
)
def test_every_optional_field_of_every_plugin_is_listed(registry: Registry[Any, Any], where: tuple[Any, ...]) -> None:
    for name in registry.names():
        conf = registry.get(name).conf
        node = {"type": name}
        job: dict[str, Any] = {where[0]: [node] if where[0] == "converters" else {where[1]: node}}
        listed = {path[2] for path, _ in documented_defaults(job) if path[:2] == where}
        optional = {f.alias or n for n, f in conf.model_fields.items() if not f.is_required() and n != "type"}
        assert listed == optional, name


def test_a_given_nested_node_gets_its_missing_keys_and_unknown_types_are_skipped() -> None:
    job = {
        "sources": {"s": {"type": "files", "limits": {"max_records": 5}}},
        "sinks": {"x": {"type": "nope"}},
        "publish": {"policy": "partial"},
    }
    listed = dict(documented_defaults(job))
    assert listed[("sources", "s", "limits", "per_dataset")] == {
        "max_records": None,
        "max_bytes": None,
        "max_files": None,
    }
    assert ("sources", "s", "limits", "max_records") not in listed
    assert listed[("publish", "max_attempts")] == 3 and ("publish", "policy") not in listed
    assert not [p for p in listed if p[:2] == ("sinks", "x")]
    assert ("pools",) in listed and not [p for p in listed if p[:1] == ("pools",) and len(p) > 1]
