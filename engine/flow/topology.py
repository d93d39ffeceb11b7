"""The flow graph: data nodes, flow edges and executors, read from a directory of config files and
checked whole (a dangling node, an unknown template or executor is a config error with its key);
and the ``roots`` where the hops of flows the flow service stores may read and write besides the
warehouse (:mod:`engine.flow.roots`), which name known nodes and flow groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from engine.config.templates import ParsedTemplate
from engine.errors import ConfigError, did_you_mean
from engine.flow.model import NAME, EdgeConf, ExecutorConf, NodeConf, RootConf, TopologyConf
from engine.spec.validation import validate

SUFFIXES = (".conf", ".yaml", ".yml", ".json")
"""A generated graph is read fastest as JSON (no substitutions): pyhocon reads about 20 KB/s."""
SECTIONS = ("nodes", "edges", "executors", "roots")
LOCAL = "local"
"""The executor a flow without ``source`` runs on unless it names one; every topology has it
(``local[*]``) unless it defines its own."""


@dataclass(frozen=True)
class Topology:
    nodes: dict[str, NodeConf]
    edges: dict[str, EdgeConf]
    executors: dict[str, ExecutorConf]
    files: dict[str, str]
    """``nodes.lake`` -> the file that defines it, for error messages."""
    roots: dict[str, RootConf] = field(default_factory=dict)
    """Where the hops of flows the service stores may read and write besides the warehouse
    (:mod:`engine.flow.roots`)."""

    def file_of(self, key: str) -> str | None:
        return self.files.get(".".join(key.split(".")[:2]))

    def outgoing(self, node: str) -> list[tuple[str, EdgeConf]]:
        """The edges leaving ``node``, by name."""
        return self._adjacency.get(node, [])

    def hops_of(self, edge: str) -> tuple[str, ...]:
        """The names of an edge's hops, one per template: ``<edge>`` for the first,
        ``<edge>-<template>`` for the next ones (adding a template renames none)."""
        return self._hops[edge]

    @cached_property
    def _hops(self) -> dict[str, tuple[str, ...]]:
        out = {}
        for name, edge in self.edges.items():
            stems = hop_names(edge.templates, key=f"edges.{name}.templates", file=self.file_of(f"edges.{name}"))
            out[name] = tuple(name if j == 0 else f"{name}-{stem}" for j, stem in enumerate(stems))
        return out

    @cached_property
    def _adjacency(self) -> dict[str, list[tuple[str, EdgeConf]]]:
        out: dict[str, list[tuple[str, EdgeConf]]] = {}
        for name, edge in sorted(self.edges.items()):
            out.setdefault(edge.from_, []).append((name, edge))
        return out


def load_topology(folder: Path, *, templates: set[str] | None = None, params: dict[str, Any] | None = None) -> Topology:
    """Every config file directly in ``folder``, merged (a name defined twice is an error), then
    checked: edges join known nodes, name known executors and, when ``templates`` is given, known
    templates. The files may read ``params`` (``${params.warehouse}``, ``${params.jobs}``)."""
    merged: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    files: dict[str, str] = {}
    found = sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES and p.is_file()) if folder.is_dir() else []
    for path in found:
        data = ParsedTemplate(path).fill(params or {})
        for section, value in data.items():
            if section not in SECTIONS:
                hint = did_you_mean(section, SECTIONS)
                raise ConfigError(f"unknown key ({hint}known: {', '.join(SECTIONS)})", key=section, file=str(path))
            if not isinstance(value, dict):
                raise ConfigError("expected a mapping of names", key=section, file=str(path))
            for name, body in value.items():
                key = f"{section}.{name}"
                if key in files:
                    raise ConfigError(f"`{name}` is defined twice (also in {files[key]})", key=key, file=str(path))
                if not NAME.fullmatch(str(name)):
                    raise ConfigError("use letters, digits, `_` and `-` (not first) in names", key=key, file=str(path))
                conf = validate(TopologyConf, {section: {name: body}}, key="", file=str(path))
                merged[section][name] = getattr(conf, section)[name]
                files[key] = str(path)
    if LOCAL not in merged["executors"]:
        merged["executors"][LOCAL] = ExecutorConf(master="local[*]", description="this machine")
    topology = Topology(files=files, **merged)
    _check(topology, templates)
    return topology


def _check(topology: Topology, templates: set[str] | None) -> None:
    for name, edge in sorted(topology.edges.items()):
        key = f"edges.{name}"
        file = topology.file_of(key)
        for end, node in (("from", edge.from_), ("to", edge.to)):
            if node not in topology.nodes:
                raise ConfigError(_unknown("data node", node, topology.nodes), key=f"{key}.{end}", file=file)
        if edge.from_ == edge.to:
            raise ConfigError(f"the edge leads from `{edge.to}` to itself", key=f"{key}.to", file=file)
        for i, executor in enumerate(edge.executors):
            if executor not in topology.executors:
                raise ConfigError(
                    _unknown("executor", executor, topology.executors), key=f"{key}.executors[{i}]", file=file
                )
        for i, template in enumerate(edge.templates):
            if templates is not None and template not in templates:
                raise ConfigError(_unknown("template", template, templates), key=f"{key}.templates[{i}]", file=file)
    _check_hop_names(topology)
    _check_roots(topology)


def _check_roots(topology: Topology) -> None:
    """A root names known data nodes and flow groups that are names."""
    for name, root in sorted(topology.roots.items()):
        key, file = f"roots.{name}", topology.file_of(f"roots.{name}")
        for i, node in enumerate(root.nodes):
            if node not in topology.nodes:
                raise ConfigError(_unknown("data node", node, topology.nodes), key=f"{key}.nodes[{i}]", file=file)
        for i, group in enumerate(root.groups):
            if not NAME.fullmatch(group):
                raise ConfigError(
                    f"`{group}` is not a flow group's name (letters, digits, `_` and `-`, not first)",
                    key=f"{key}.groups[{i}]",
                    file=file,
                )


def _check_hop_names(topology: Topology) -> None:
    """Every hop name names one edge's template: it keys the hop's state, lease and DAGs."""
    owner: dict[str, str] = {}
    for name in sorted(topology.edges):
        for hop in topology.hops_of(name):
            if hop in owner:  # edges are visited in name order: owner[hop] sorts first
                raise ConfigError(
                    f"edges `{owner[hop]}` and `{name}` both give a hop named `{hop}` (`<edge>-<template>` names an "
                    "edge's later templates): rename one of them",
                    key=f"edges.{name}",
                    file=topology.file_of(f"edges.{name}"),
                )
            owner[hop] = name


def hop_names(uris: list[str], *, key: str, file: str | None) -> list[str]:
    """Each template's hop name part, from its name alone when that is unique among ``uris``, else
    ``<pack>-<name>``: it depends on no position, so reordering templates moves no state."""
    stems = [u.rsplit("/", 1)[-1] for u in uris]
    out: list[str] = []
    for i, uri in enumerate(uris):
        if uri in uris[:i]:
            raise ConfigError(f"template `{uri}` is listed twice", key=f"{key}[{i}]", file=file)
        name = stems[i] if stems.count(stems[i]) == 1 else uri.replace("/", "-")
        if name in out:  # p/t and q/t are named p-t and q-t: a template r/p-t would be p-t too
            first = uris[out.index(name)]
            raise ConfigError(
                f"templates `{first}` and `{uri}` would both name hops `{name}`: rename one of them",
                key=f"{key}[{i}]",
                file=file,
            )
        out.append(name)
    return out


def _unknown(what: str, name: str, known: Any) -> str:
    names = sorted(known)
    return f"unknown {what} `{name}` ({did_you_mean(name, names)}known: {', '.join(names) or 'none'})"
