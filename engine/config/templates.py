"""Read the config files of flows (flows, template packs, templates, the topology) into plain
dicts, and fill a job template with its parameters.

A template is an ordinary job file (HOCON or YAML) that refers to its parameters as
``${params.<name>}``; filling it resolves those references (and HOCON's own ``${?ENV}``) with
the library that reads the file, so a template is written in the file's own syntax. A topology
file may also be JSON, read as it is (the fastest to read; no substitutions).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pyhocon import ConfigFactory, ConfigTree
from pyhocon.config_parser import ConfigParser
from pyhocon.config_tree import ConfigQuotedString, ConfigSubstitution, ConfigValues
from pyhocon.exceptions import ConfigException
from pyparsing import ParseBaseException

from engine.config.hocon import hocon_problem, yaml_problem
from engine.errors import ConfigError

JSON = ".json"
PARAMS = "params"
"""The root key a template reads its parameters under: ``${params.table}``."""


class ParsedTemplate:
    """A template file parsed once and filled many times (a flow service compiles thousands of
    hops from a few templates; pyhocon takes tens of milliseconds per parse).

    A HOCON template whose substitutions all read ``params`` is filled by :func:`_fill`, which
    applies pyhocon's own rules (a value alone keeps its type, values with other tokens join as
    text with the whitespace written after them, ``${?x}`` missing drops the key); anything else
    (``${?ENV}``, self-references, objects or lists joined with other tokens) is filled by
    pyhocon itself, as :func:`fill_template` does."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tree: Any = None
        self._fast: Callable[[Mapping[str, Any]], Any] | None = None
        if path.suffix == JSON:
            data = _json(_read(path), path)
            self._fast, self._reads = (lambda params: _plain(data)), ()
        elif path.suffix == ".conf":
            try:
                self._tree = ConfigFactory.parse_string(path.read_text(), resolve=False, basedir=str(path.parent))
            except OSError as exc:
                raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
            except ParseBaseException as exc:
                raise ConfigError(hocon_problem(exc), file=str(path)) from exc
            except ConfigException as exc:
                raise ConfigError(f"cannot parse HOCON: {exc}", file=str(path)) from exc
            if not isinstance(self._tree, ConfigTree):
                raise ConfigError(f"expected a mapping at the top, got {type(self._tree).__name__}", file=str(path))
            refs: list[_Ref] = []
            try:
                self._fast = _compiled(self._tree, refs)
            except _Slow:
                self._fast = None
            else:
                if all(r.parts[0] == PARAMS for r in refs):
                    self._reads = tuple(dict.fromkeys(r.parts[1:] for r in refs))

    _reads: tuple[tuple[str, ...], ...] | None = None

    def inputs(self, params: Mapping[str, Any]) -> str | None:
        """What of ``params`` the compiled filler reads, as text: two ``params`` with equal inputs
        are filled alike by it (:meth:`filled` says whether it was the one that filled). None
        when the template is always filled by pyhocon or OmegaConf."""
        if self._reads is None:
            return None
        values = []
        for parts in self._reads:
            at: Any = params
            for part in parts:
                at = at.get(part, _MISSING) if type(at) is dict or isinstance(at, Mapping) else _MISSING
            values.append(None if at is _MISSING else (at,))
        return repr(values)  # plain data: equal texts, equal values

    def fill(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return self.filled(params)[0]

    def filled(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """The filled template, and whether the compiled filler made it: then it depends on
        nothing but :meth:`inputs` (pyhocon, for one, also reads dotted keys inside values)."""
        if self._fast is not None:
            try:
                data = self._fast({PARAMS: params})
            except _Slow:
                pass
            else:
                if not isinstance(data, dict):
                    raise ConfigError(f"expected a mapping at the top, got {type(data).__name__}", file=str(self.path))
                data.pop(PARAMS, None)
                return data, True
        return fill_template(self.path, params), False

    def section(self, key: str) -> Any:
        """``key`` as written, before any parameter is known: a template's ``parameters``."""
        if self._tree is None:
            return declared(self.path, key)
        try:
            return _compiled(self._tree.get(key, None), [])({})
        except _Slow:
            raise ConfigError(
                f"`{key}` cannot use substitutions (it is read before they are known)", key=key, file=str(self.path)
            ) from None


class _Slow(Exception):
    """A construct the compiled template leaves to pyhocon."""


_ABSENT = object()
_MISSING = object()
_Filler = Callable[[Mapping[str, Any]], Any]


def _compiled(node: Any, refs: list[_Ref]) -> _Filler:
    """``node`` of a parsed HOCON tree as a function of the parameters giving plain values; its
    substitutions are added to ``refs``."""
    if isinstance(node, ConfigTree):
        items = [(str(k).strip('"'), _compiled(v, refs)) for k, v in node.items()]  # as as_plain_ordered_dict

        def tree(params: Mapping[str, Any]) -> Any:
            out = {}
            for key, fill in items:
                value = fill(params)
                if value is not _ABSENT:
                    out[key] = value
            return out

        return tree
    if isinstance(node, list):
        fills = [_compiled(v, refs) for v in node]

        def listed(params: Mapping[str, Any]) -> Any:
            values = [fill(params) for fill in fills]
            if any(v is _ABSENT for v in values):
                raise _Slow
            return values

        return listed
    if isinstance(node, ConfigValues):
        if getattr(node, "overridden_value", None) is not None:
            raise _Slow
        if any(isinstance(t, (ConfigTree, list)) for t in node.tokens):
            raise _Slow
        tokens = [_Ref.of(t) if isinstance(t, ConfigSubstitution) else t for t in node.tokens]
        refs += [t for t in tokens if isinstance(t, _Ref)]
        if len(tokens) == 1 and isinstance(tokens[0], _Ref):
            return tokens[0].alone
        return lambda params: _values(tokens, params)
    if isinstance(node, ConfigSubstitution):
        raise _Slow
    value = _plain(node)
    return lambda params: value


class _Ref:
    """A substitution (``${params.x}``, ``${?params.x}``), its path split once."""

    __slots__ = ("optional", "parts", "ws")

    def __init__(self, parts: tuple[str, ...], optional: bool, ws: Any) -> None:
        self.parts = parts
        self.optional = optional
        self.ws = ws

    @classmethod
    def of(cls, token: ConfigSubstitution) -> _Ref:
        return cls(tuple(token.variable.split(".")), bool(token.optional), token.ws)

    def find(self, params: Mapping[str, Any]) -> tuple[bool, Any]:
        at: Any = params
        for part in self.parts:
            if not (type(at) is dict or isinstance(at, Mapping)) or part not in at:
                if self.parts[0] != PARAMS:
                    raise _Slow  # an environment variable or another key of the file
                return False, None
            at = at[part]
        return True, at

    def alone(self, params: Mapping[str, Any]) -> Any:
        """The value of a key written as this substitution alone: its value as it is."""
        found, value = self.find(params)
        if not found and not self.optional:
            raise _Slow  # pyhocon says which variable, where
        return _ABSENT if value is None else _plain(value)


def _values(given: list[Any], params: Mapping[str, Any]) -> Any:
    """A value written as several tokens, pyhocon's way: one alone keeps its type; with others,
    each joins as text with the whitespace written after it (not the last's); ``${?x}`` missing
    is nothing, and a value of nothing at all drops its key."""
    last = len(given) - 1
    tokens: list[Any] = []
    for index, token in enumerate(given):
        if isinstance(token, _Ref):
            found, value = token.find(params)
            if not found:
                if not token.optional:
                    raise _Slow  # pyhocon says which variable, where
                value = None
            if isinstance(value, (Mapping, list)):
                if last != 0:
                    raise _Slow
                return _plain(value)
            if value is not None and index != last:
                value = f"{value}{token.ws}"
            tokens.append(value)
        else:
            tokens.append(token)
    tokens = [t for t in tokens if t is not None]
    if not tokens:
        return _ABSENT
    if len(tokens) == 1:
        only = tokens[0]
        return _plain(only.value if isinstance(only, ConfigQuotedString) else only)
    end = len(tokens) - 1
    return "".join(
        (t.value + ("" if i == end else t.ws)) if isinstance(t, ConfigQuotedString) else str(t)
        for i, t in enumerate(tokens)
    )


def read_config(path: Path) -> dict[str, Any]:
    """A HOCON (``.conf``), YAML or JSON file as a plain dict, substitutions resolved."""
    return fill_template(path, None)


def fill_template(path: Path, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The file at ``path`` with ``${params.<name>}`` resolved from ``params``; the ``params`` key
    itself is not in the result. ``None``: no ``params`` are defined (a plain config file). A JSON
    file is read as it is, and may not hold ``${``: JSON has no substitutions."""
    text = _read(path)
    if path.suffix == JSON:
        data = _json(text, path)
    else:
        data = _hocon(text, path, params) if path.suffix == ".conf" else _yaml(text, path, params)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top, got {type(data).__name__}", file=str(path))
    data.pop(PARAMS, None)
    return data


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc


def _json(text: str, path: Path) -> Any:
    """JSON, every key of an object once (pyhocon would merge a key given twice; JSON readers keep
    one of them or the other, so it is refused)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"`{key}` is given twice in one object", file=str(path))
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=unique)
        _no_substitutions(data, "", path)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"cannot parse JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", file=str(path)
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top, got {type(data).__name__}", file=str(path))
    return data


def _no_substitutions(value: Any, key: str, path: Path) -> None:
    """Refuse ``${...}`` in a JSON file's text: it would stay text there (a file converted from
    HOCON would keep ``${params.warehouse}`` in its paths)."""
    if isinstance(value, str) and "${" in value:
        raise ConfigError(
            "a JSON file has no substitutions: write it as HOCON (.conf) or YAML to read `${...}`",
            key=key,
            file=str(path),
        )
    if isinstance(value, dict):
        for k, v in value.items():
            _no_substitutions(v, f"{key}.{k}" if key else str(k), path)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_substitutions(v, f"{key}[{i}]", path)


def _hocon(text: str, path: Path, params: Mapping[str, Any] | None) -> Any:
    try:
        tree = ConfigFactory.parse_string(text, resolve=params is None, basedir=str(path.parent))
        if not isinstance(tree, ConfigTree):
            raise ConfigError(f"expected a mapping at the top, got {type(tree).__name__}", file=str(path))
        if params is not None:  # parsed apart, then merged: a root object in braces stays valid
            tree = ConfigTree.merge_configs(ConfigFactory.from_dict({PARAMS: dict(params)}), tree)
            ConfigParser.resolve_substitutions(tree)
    except ConfigException as exc:
        raise ConfigError(_unresolved(str(exc), params), file=str(path)) from exc
    except ParseBaseException as exc:
        raise ConfigError(hocon_problem(exc), file=str(path)) from exc
    return _plain(tree.as_plain_ordered_dict() if isinstance(tree, ConfigTree) else tree)


def _yaml(text: str, path: Path, params: Mapping[str, Any] | None) -> Any:
    try:
        conf = OmegaConf.create(text)
        if params is not None:  # a parameter's own text is not interpolated again (as in HOCON)
            conf = OmegaConf.merge(conf, {PARAMS: _escaped(dict(params))})
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(_unresolved(str(exc).splitlines()[0], params), file=str(path)) from exc
    except Exception as exc:  # YAML's parser errors
        raise ConfigError(yaml_problem(exc), file=str(path)) from exc


def _escaped(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value.replace("${", "\\${") if isinstance(value, str) else value


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
    """Plain data, new containers (a parameter's map or list is never shared with the result)."""
    if value is None or type(value) in (bool, int, float, str):
        return value
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
            return ParsedTemplate(path).section(key)
        data = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
        if not isinstance(data, dict):
            raise ConfigError(f"expected a mapping at the top, got {type(data).__name__}", file=str(path))
        return data.get(key)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    except (ConfigException, ParseBaseException, OmegaConfBaseException) as exc:
        raise ConfigError(f"cannot parse: {exc}", file=str(path)) from exc
