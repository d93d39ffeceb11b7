"""Sizes in config: ``1000``, ``"64m"``, ``"2g"``."""

from __future__ import annotations

import re

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(value: int | str | None) -> int | None:
    """``1000``, ``"64m"``, ``"2g"``, ``"1.5gb"`` -> bytes."""
    if value is None or isinstance(value, int):
        return value
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", value.lower())
    if not found:
        raise ValueError(f"`{value}` is not a size (use e.g. 1000, 64m, 2g)")
    return int(float(found.group(1)) * _UNITS[found.group(2)])
