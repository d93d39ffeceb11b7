"""Compile the flow a run names (``flow=<group>/<name>``) with the topology and templates it uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.config.app import conf_dir
from engine.config.jobs_source import jobs_root
from engine.errors import ConfigError
from engine.flow.compiler import FlowCompiler, FlowPlan
from engine.flow.model import NAME
from engine.flow.templates import Catalog
from engine.flow.topology import load_topology

TEMPLATES_DIR = "templates"
TOPOLOGY_DIR = "topology"


def topology_dir(given: str | None) -> Path:
    """``topology_dir=<dir>``, else ``conf/topology/``."""
    return Path(given).resolve() if given else conf_dir() / TOPOLOGY_DIR


def compile_flow(
    raw: Mapping[str, Any],
    *,
    choice: str,
    file: str | None,
    warehouse: str,
    topology: str | None = None,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    groups: tuple[str, ...] = (),
) -> FlowPlan:
    """The plan of flow ``choice`` (``<group>/<name>``, its config ``raw`` from ``file``);
    ``groups``: those of the flow's ``owner``, for the packs' ``group:<name>`` principals."""
    group, _, name = choice.rpartition("/")
    if not group or "/" in group or not NAME.fullmatch(group) or not NAME.fullmatch(name):
        raise ConfigError(
            f"`{choice}`: a flow is chosen as `flow=<flowGroup>/<flowName>` (jobs/flows/<flowGroup>/<flowName>.conf), "
            "each named with letters, digits, `_` and `-` (not first)",
            key="flow",
        )
    compiler = flow_compiler(warehouse=warehouse, topology=topology, prepare=prepare)
    return compiler.compile(raw, group=group, name=name, file=file, groups=groups)


def flow_compiler(
    *, warehouse: str, topology: str | None, prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> FlowCompiler:
    """A compiler over the flow graph in ``topology`` (``conf/topology/``) and ``jobs/templates/``."""
    folder = topology_dir(topology)
    if not folder.is_dir():
        raise ConfigError(f"the flow graph's folder {folder} does not exist", key="topology_dir")
    catalog = Catalog(jobs_root() / TEMPLATES_DIR)
    params = {"warehouse": warehouse, "jobs": str(jobs_root())}
    graph = load_topology(folder, templates=catalog.names(), params=params)
    return FlowCompiler(graph, catalog, warehouse=warehouse, prepare=prepare)
