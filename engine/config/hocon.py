"""Read HOCON job files into plain dicts OmegaConf accepts.

pyhocon resolves includes, substitutions and ``${?ENV}`` itself; what is left must not look like an
OmegaConf interpolation, so a literal ``${`` is escaped. Values pyhocon types specially (periods,
dates) become strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyhocon import ConfigFactory
from pyhocon.exceptions import ConfigException
from pyparsing import ParseBaseException

from engine.errors import ConfigError


def load_hocon(path: Path) -> dict[str, Any]:
    try:
        tree = ConfigFactory.parse_file(str(path), resolve=True)
    except (ConfigException, ParseBaseException) as exc:
        raise ConfigError(f"cannot parse HOCON: {exc}", file=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read job file: {exc.strerror}", file=str(path)) from exc
    plain = _plain(tree.as_plain_ordered_dict())
    assert isinstance(plain, dict)
    return plain


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)
