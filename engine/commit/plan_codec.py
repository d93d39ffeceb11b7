"""Work units to JSON and back, so a batch plan can be stored before any data is read and a
retry re-executes exactly that plan. Payloads are the sources' own dataclasses, tuples, watermarks
and datetimes; only the dataclasses a plugin registered (:data:`engine.plugins.PAYLOADS`) are
rebuilt, so a stored plan never makes the engine import what it names."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from engine.plugins.payloads import PAYLOADS
from engine.state import watermarks
from engine.state.watermarks import Watermark


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Watermark):
        return {"$wm": value.to_json()}
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted(encode(v) for v in value)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"$map": {str(k): encode(v) for k, v in value.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return {
            "$dc": PAYLOADS.stored_as(f"{cls.__module__}:{cls.__qualname__}"),
            "f": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init},
        }
    raise TypeError(f"cannot store a {type(value).__name__} in a batch plan")


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$wm" in value:
        return watermarks.parse(value["$wm"])
    if "$dt" in value:
        return datetime.fromisoformat(value["$dt"])
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$set" in value:
        return {decode(v) for v in value["$set"]}
    if "$map" in value:
        return {k: decode(v) for k, v in value["$map"].items()}
    cls = PAYLOADS.resolve(value["$dc"])
    return cls(**{k: decode(v) for k, v in value["f"].items()})
