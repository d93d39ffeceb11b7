"""Read HOCON and YAML config files into plain dicts OmegaConf accepts.

pyhocon resolves includes, substitutions and ``${?ENV}`` itself; what is left must not look like an
OmegaConf interpolation, so a literal ``${`` is escaped. Values pyhocon types specially (periods,
dates) become strings.

A file that does not parse is one :class:`~engine.errors.ConfigError` naming the file, the line
and the column (``cannot parse HOCON at line 3, column 1: Expected '}', found end of text``), for a
job file and a connection file alike: never the parser's traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML, which OmegaConf reads YAML with
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pyhocon import ConfigFactory
from pyhocon.exceptions import ConfigException
from pyparsing import ParseBaseException

from engine.errors import ConfigError

__all__ = ["hocon_problem", "load_hocon", "load_yaml", "yaml_problem"]

_WHERE = re.compile(r"\s*\(at char \d+\), \(line:\d+, col:\d+\)\s*$")
"""pyparsing's own position suffix, which the message replaces by line and column."""


def load_hocon(path: Path) -> dict[str, Any]:
    try:
        tree = ConfigFactory.parse_file(str(path), resolve=True)
    except ParseBaseException as exc:
        raise ConfigError(hocon_problem(exc), file=str(path)) from exc
    except ConfigException as exc:
        raise ConfigError(f"cannot parse HOCON: {_first_line(exc)}", file=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", file=str(path)) from exc
    plain = _plain(tree.as_plain_ordered_dict())
    assert isinstance(plain, dict)
    return plain


def load_yaml(path: Path, *, resolve: bool = False) -> Any:
    """The YAML file at ``path`` as plain values; ``resolve``: its ``${...}`` interpolations
    (``${oc.env:X}``) resolved on their own (a job's are resolved once the whole config composes)."""
    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=resolve)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_problem(exc), file=str(path)) from exc
    except OmegaConfBaseException as exc:
        problem = str(getattr(exc, "msg", None) or exc).splitlines()[0]
        raise ConfigError(f"cannot read YAML: {problem}", file=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", file=str(path)) from exc


def hocon_problem(exc: ParseBaseException) -> str:
    """``cannot parse HOCON at line L, column C: <what the parser expected>``, on one line."""
    return f"cannot parse HOCON at line {exc.lineno}, column {exc.col}: {_WHERE.sub('', str(exc))}"


def yaml_problem(exc: BaseException) -> str:
    """``cannot parse YAML at line L, column C: <problem> (<context> from line ...)``, on one line,
    of what PyYAML raised (its marks count from 0); its first line for an error without a mark."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not isinstance(exc, yaml.MarkedYAMLError) or mark is None:
        return f"cannot parse YAML: {_first_line(exc)}"
    problem = exc.problem or exc.context or "not YAML"
    context = ""
    if exc.context and exc.problem:
        since = exc.context_mark
        context = f" ({exc.context}" + (f" from line {since.line + 1}, column {since.column + 1})" if since else ")")
    return f"cannot parse YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{context}"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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
