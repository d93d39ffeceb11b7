"""Fan-out: one DAG template, a JobDag per dataset.

The datasets are listed in the config or found when the job runs (a discovery: see
:mod:`engine.runtime.discovery`). Each dataset is a :class:`Found` with its placeholder values;
``{dataset}`` and the discovery's other placeholders are replaced in every string of the template.
Only ``{word}`` placeholders the discovery defines are replaced, so regular expressions such as
``\\d{4}`` pass through; an unknown ``{word}`` is refused, as a typo would otherwise reach the data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ConfigError
from engine.spec.model import FanOutConf, GlobDiscoverConf, JdbcTablesDiscoverConf

_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
PLACEHOLDERS = {
    None: ("dataset",),
    "glob": ("dataset", "path"),
    "jdbc_tables": ("dataset", "table", "schema"),
}


@dataclass(frozen=True)
class Found:
    """One dataset of a fan-out and the values of its placeholders."""

    dataset: str
    values: dict[str, str] = field(default_factory=dict)

    def value(self, name: str) -> str:
        return self.dataset if name == "dataset" else self.values[name]


def example(discover: GlobDiscoverConf | JdbcTablesDiscoverConf) -> Found:
    """A stand-in dataset to check the template with before the real ones are found."""
    names = PLACEHOLDERS[discover.type]
    return Found("example", {n: f"example_{n}" for n in names if n != "dataset"})


def listed(conf: FanOutConf) -> list[Found]:
    return [Found(d) for d in conf.datasets]


def select(conf: FanOutConf, found: list[Found], *, file: str | None) -> list[Found]:
    """``found`` narrowed by ``include``/``exclude``, sorted by name, duplicates refused."""
    keep = []
    for item in found:
        if conf.include and not _regex(conf.include, "job.fan_out.include", file).search(item.dataset):
            continue
        if conf.exclude and _regex(conf.exclude, "job.fan_out.exclude", file).search(item.dataset):
            continue
        keep.append(item)
    return sorted(keep, key=lambda f: f.dataset)


def expand(conf: FanOutConf, found: Found, *, file: str | None) -> tuple[str, dict[str, Any]]:
    """The DAG name and the template's config for ``found``."""
    allowed = PLACEHOLDERS[conf.discover.type if conf.discover else None]
    name = _NAME_CHARS.sub("_", _substitute(conf.name, found, allowed, "job.fan_out.name", file))
    return name, _walk(conf.template, found, allowed, "job.fan_out.template", file)


def _walk(node: Any, found: Found, allowed: tuple[str, ...], key: str, file: str | None) -> Any:
    if isinstance(node, str):
        return _substitute(node, found, allowed, key, file)
    if isinstance(node, dict):
        return {k: _walk(v, found, allowed, f"{key}.{k}", file) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, found, allowed, f"{key}[{i}]", file) for i, v in enumerate(node)]
    return node


def _substitute(text: str, found: Found, allowed: tuple[str, ...], key: str, file: str | None) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in allowed:
            known = ", ".join(f"{{{a}}}" for a in allowed)
            raise ConfigError(f"unknown placeholder `{{{name}}}`; this fan-out defines {known}", key=key, file=file)
        return found.value(name)

    return _PLACEHOLDER.sub(one, text)


def _regex(pattern: str, key: str, file: str | None) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"not a regular expression: {exc}", key=key, file=file) from None
