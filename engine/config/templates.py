"""Read the config files of flows (flows, template packs, templates, the topology) into plain
dicts, and fill a job template with its parameters.

A template is an ordinary job file (HOCON or YAML) that refers to its parameters as
``${params.<name>}``; filling it resolves those references (and HOCON's own ``${?ENV}``) with
the library that reads the file, so a template is written in the file's own syntax.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pyhocon import ConfigFactory, ConfigTree
from pyhocon.config_parser import ConfigParser
from pyhocon.exceptions import ConfigException
from pyparsing import ParseBaseException

from engine.errors import ConfigError

PARAMS = "params"
"""The root key a template reads its parameters under: ``${params.table}``."""


def read_config(path: Path) -> dict[str, Any]:
    """A HOCON (``.conf``) or YAML file as a plain dict, substitutions resolved."""
    return fill_template(path, None)


def fill_template(path: Path, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The file at ``path`` with ``${params.<name>}`` resolved from ``params``; the ``params`` key
    itself is not in the result. ``None``: no ``params`` are defined (a plain config file)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    data = _hocon(text, path, params) if path.suffix == ".conf" else _yaml(text, path, params)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top, got {type(data).__name__}", file=str(path))
    data.pop(PARAMS, None)
    return data


def _hocon(text: str, path: Path, params: Mapping[str, Any] | None) -> Any:
    try:
        tree = ConfigFactory.parse_string(text, resolve=params is None, basedir=str(path.parent))
        if params is not None:  # parsed apart, then merged: a root object in braces stays valid
            tree = ConfigTree.merge_configs(ConfigFactory.from_dict({PARAMS: dict(params)}), tree)
            ConfigParser.resolve_substitutions(tree)
    except ConfigException as exc:
        raise ConfigError(_unresolved(str(exc), params), file=str(path)) from exc
    except ParseBaseException as exc:
        raise ConfigError(f"cannot parse HOCON: {exc}", file=str(path)) from exc
    return _plain(tree.as_plain_ordered_dict())


def _yaml(text: str, path: Path, params: Mapping[str, Any] | None) -> Any:
    try:
        conf = OmegaConf.create(text)
        if params is not None:
            conf = OmegaConf.merge(conf, {PARAMS: dict(params)})
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(_unresolved(str(exc).splitlines()[0], params), file=str(path)) from exc
    except Exception as exc:  # YAML's parser errors
        raise ConfigError(f"cannot parse YAML: {exc}", file=str(path)) from exc


def _unresolved(message: str, params: Mapping[str, Any] | None) -> str:
    if params is None or PARAMS not in message:
        return f"cannot resolve: {message}"
    known = ", ".join(sorted(_flat(params))) or "none"
    return f"the template refers to a parameter no one gave ({message}); parameters given: {known}"


def _flat(params: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in params.items():
        if isinstance(v, Mapping) and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}")
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def declared(path: Path, key: str) -> Any:
    """The ``key`` section of a template as written (its ``${params...}`` references unresolved,
    since they are not known yet): a template's declared parameters."""
    try:
        text = path.read_text()
        if path.suffix == ".conf":
            tree = ConfigFactory.parse_string(text, resolve=False, basedir=str(path.parent))
            value = tree.get(key, None)
            return _plain(value.as_plain_ordered_dict()) if hasattr(value, "as_plain_ordered_dict") else _plain(value)
        conf = OmegaConf.create(text)
        return OmegaConf.to_container(conf, resolve=False).get(key)  # type: ignore[union-attr]
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    except (ConfigException, ParseBaseException, OmegaConfBaseException) as exc:
        raise ConfigError(f"cannot parse: {exc}", file=str(path)) from exc
