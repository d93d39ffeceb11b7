"""Compile the flow a run names (``flow=<group>/<name>``) with the topology and templates it uses.

A flow the flow service stored (its execution reads it from a file under the service's store) is
compiled confined (:mod:`engine.flow.roots`), as the service compiled it when it was stored: a
flow stored before a root was narrowed, or whose template now makes another path, is refused
before anything runs. A flow file under ``jobs/flows/`` is the deployment's own, as its templates
and topology are, and is not confined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.config.paths import conf_dir, jobs_root
from engine.errors import ConfigError
from engine.flow.compiler import FlowCompiler, FlowPlan
from engine.flow.limits import MAX_GROUP, MAX_NAME
from engine.flow.model import NAME
from engine.flow.roots import Confinement, stored_by_service
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
    if not group or "/" in group or not _named(group, MAX_GROUP) or not _named(name, MAX_NAME):
        raise ConfigError(
            f"`{choice}`: a flow is chosen as `flow=<flowGroup>/<flowName>` (jobs/flows/<flowGroup>/<flowName>.conf), "
            f"each named with letters, digits, `_` and `-` (not first), the group in at most {MAX_GROUP} characters "
            f"and the name in at most {MAX_NAME}",
            key="flow",
        )
    confined = stored_by_service(file, warehouse)
    compiler = flow_compiler(warehouse=warehouse, topology=topology, prepare=prepare, confined=confined)
    return compiler.compile(raw, group=group, name=name, file=file, groups=groups)


def flow_compiler(
    *,
    warehouse: str,
    topology: str | None,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    confined: bool = False,
) -> FlowCompiler:
    """A compiler over the flow graph in ``topology`` (``conf/topology/``) and ``jobs/templates/``;
    ``confined``: its hops read and write only inside the roots the graph allows."""
    folder = topology_dir(topology)
    if not folder.is_dir():
        raise ConfigError(f"the flow graph's folder {folder} does not exist", key="topology_dir")
    catalog = Catalog(jobs_root() / TEMPLATES_DIR)
    params = {"warehouse": warehouse, "jobs": str(jobs_root())}
    graph = load_topology(folder, templates=catalog.names(), params=params)
    confinement = Confinement(graph, warehouse) if confined else None
    return FlowCompiler(graph, catalog, warehouse=warehouse, prepare=prepare, confinement=confinement)


def _named(text: str, most: int) -> bool:
    return len(text) <= most and NAME.fullmatch(text) is not None
