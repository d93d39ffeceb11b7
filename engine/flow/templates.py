"""Job templates and the template packs that hold them (``jobs/templates/<pack>/``).

A pack's ``pack.conf`` (or ``.yaml``) names its owners and the principals allowed to use it; every
other config file in the pack's folder is a template: an ordinary job file that declares its
``parameters`` and reads them as ``${params.<name>}``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from engine.config.templates import ParsedTemplate, read_config
from engine.errors import ConfigError, did_you_mean
from engine.flow.model import NAME, PackConf, ParametersConf
from engine.spec.validation import validate

SUFFIXES = (".conf", ".yaml", ".yml")
PACK_FILE = "pack"
ANYONE = "*"
GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class Pack:
    name: str
    conf: PackConf
    file: str | None
    """None: the pack has no ``pack.conf``, so no one may use it."""

    def allows(self, principal: str | None, groups: Iterable[str] = ()) -> bool:
        """Whether ``principal`` (a user, with its ``groups``) may use the pack's templates."""
        allowed = {*self.conf.owners, *self.conf.principals}
        if ANYONE in allowed:
            return True
        names = {principal} if principal else set()
        names |= {f"{GROUP_PREFIX}{g}" for g in groups}
        return bool(names & allowed)

    def refusal(self, principal: str | None) -> str:
        who = f"principal `{principal}`" if principal else "a flow without `owner`"
        if self.file is None:
            return (
                f"template pack `{self.name}` has no pack file (pack.conf: owners, principals), so {who} may not use it"
            )
        allowed = ", ".join(sorted({*self.conf.owners, *self.conf.principals})) or "no one"
        return f"{who} may not use template pack `{self.name}` (allowed: {allowed}; see {self.file})"


@dataclass(frozen=True)
class Template:
    uri: str
    """``<pack>/<name>``."""
    pack: Pack
    file: Path

    @cached_property
    def parsed(self) -> ParsedTemplate:
        return ParsedTemplate(self.file)

    @cached_property
    def parameters(self) -> ParametersConf:
        raw = self.parsed.section("parameters")
        return validate(ParametersConf, raw or {}, key="parameters", file=str(self.file))

    def fill(self, params: dict[str, Any]) -> dict[str, Any]:
        """The job config: the template with ``params`` in place, its ``parameters`` dropped."""
        return self.filled(params)[0]

    def filled(self, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """:meth:`fill`, and whether the job depends only on ``parsed.inputs(params)``."""
        job, by_inputs = self.parsed.filled(params)
        job.pop("parameters", None)
        return job, by_inputs


class Catalog:
    """The templates under one folder (``jobs/templates/``), read when first asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @cached_property
    def templates(self) -> dict[str, Template]:
        found: dict[str, Template] = {}
        if not self.root.is_dir():
            return found
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and NAME.fullmatch(p.name)):
            pack = self._pack(folder)
            for file in sorted(folder.iterdir()):
                if file.is_file() and file.suffix in SUFFIXES and file.stem != PACK_FILE:
                    if not NAME.fullmatch(file.stem):
                        raise ConfigError(
                            f"template `{file.stem}`: name templates with letters, digits, `_` and `-` (not first): "
                            "the name becomes part of hop and DAG names",
                            file=str(file),
                        )
                    uri = f"{folder.name}/{file.stem}"
                    if uri in found:
                        raise ConfigError(f"template `{uri}` is defined twice ({found[uri].file})", file=str(file))
                    found[uri] = Template(uri, pack, file)
        return found

    def names(self) -> set[str]:
        return set(self.templates)

    def get(self, uri: str, *, key: str, file: str | None) -> Template:
        found = self.templates.get(uri)
        if found is None:
            hint = did_you_mean(uri, self.templates)
            known = ", ".join(sorted(self.templates)) or f"none under {self.root}"
            raise ConfigError(f"unknown template `{uri}` ({hint}known: {known})", key=key, file=file)
        return found

    @staticmethod
    def _pack(folder: Path) -> Pack:
        file = next((folder / f"{PACK_FILE}{s}" for s in SUFFIXES if (folder / f"{PACK_FILE}{s}").is_file()), None)
        if file is None:
            return Pack(folder.name, PackConf(), None)
        return Pack(folder.name, validate(PackConf, read_config(file), key="", file=str(file)), str(file))
