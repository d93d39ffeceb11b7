"""Where a confined flow's hops may read and write (engine.flow.roots), the names every plan must
fit in a file name (engine.flow.limits), and the flow's strict values, through the compiler over
topologies and templates written under ``tmp_path``. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config.templates import read_config
from engine.errors import ConfigError
from engine.flow import FlowCompiler, FlowPlan, compile_flow
from engine.flow.roots import Confinement
from tests.flow.test_compiler import FAN, LISTED, REPO, World, edge, flow, hocon

FILES = """\
parameters { required = [src] }
sources { s { type = files, format = json, path = ${params.src}, schema = "id BIGINT" } }
sinks { t { type = delta, from = valid, path = out } }
"""
"""A records job reading ``src`` (a path or a glob) into ``<warehouse>/out``."""
OUT = """\
parameters { defaults { dst = "/tmp/engine-58-template-default" } }
copy { source = ${params.warehouse}"/in", target = ${params.dst} }
"""
"""A template whose own default makes a path outside the warehouse."""


def confined(world: World, warehouse: Path | None = None) -> FlowCompiler:
    graph, catalog = world.load()
    where = str(warehouse or world.warehouse)
    return FlowCompiler(graph, catalog, warehouse=where, confinement=Confinement(graph, where))


def compiled(world: World, body: dict[str, Any], *, group: str = "g", warehouse: Path | None = None) -> FlowPlan:
    return confined(world, warehouse).compile(body, group=group, name="f", file=world.flow_file)


def refused(world: World, body: dict[str, Any], *, group: str = "g") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compiled(world, body, group=group)
    return info.value


def roots(world: World, **found: dict[str, Any]) -> None:
    (world.topology_dir / "roots.conf").write_text(hocon({"roots": found}))


def listed(**properties: Any) -> dict[str, Any]:
    return {"templateUris": ["p/listed"], "properties": properties}


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@pytest.fixture
def graph(world: World) -> World:
    """Nodes ``a`` (a folder outside the warehouse) and ``lake`` (inside), an edge ``a_lake``
    copying one into the other, and the template ``p/listed`` copying ``src`` to ``dst``."""
    nodes = {"a": world.node("a"), "lake": {"properties": {"path": str(world.warehouse / "copied")}}}
    world.topology(nodes, {"a_lake": edge("a", "lake")})
    world.template("p/listed", LISTED)
    return world


def test_a_hop_reads_outside_the_warehouse_only_where_a_root_of_its_node_allows(graph: World) -> None:
    found = refused(graph, flow("a", "lake"))
    assert found.key == "hops.a_lake.job.copy.source", "no flow property made the path: the hop job's key"
    assert f"would read {graph.data / 'a'}" in found.message and "outside the places" in found.message
    assert "the warehouse" in found.message and "`roots`" in found.message

    roots(graph, landing={"paths": [str(graph.data / "a")], "nodes": ["a"]})
    assert [h.name for h in compiled(graph, flow("a", "lake")).hops] == ["a_lake"]
    other = refused(graph, listed(src=str(graph.data / "a"), dst=str(graph.warehouse / "x")))
    assert other.key == "flow.properties.src", "a root of node `a` serves only the hops of `a`'s edges"


def test_a_root_is_read_only_unless_it_says_write(graph: World) -> None:
    roots(graph, landing={"paths": [str(graph.data)], "nodes": ["a"]})
    back = graph.topology_dir / "graph.conf"
    back.write_text(back.read_text().replace(str(graph.warehouse / "copied"), str(graph.data / "back")))
    found = refused(graph, flow("a", "lake"))
    assert found.key == "hops.a_lake.job.copy.target" and "where this flow may only read" in found.message
    roots(graph, landing={"paths": [str(graph.data)], "nodes": ["a"], "write": True})
    assert compiled(graph, flow("a", "lake")).hops


def test_a_root_of_a_flow_group_serves_only_that_groups_flows(graph: World) -> None:
    roots(graph, sales={"paths": [str(graph.data / "sales")], "groups": ["sales"], "write": True})
    body = listed(src=str(graph.warehouse / "in"), dst=str(graph.data / "sales" / "out"))
    assert compiled(graph, body, group="sales").hops
    found = refused(graph, body, group="marketing")
    assert found.key == "flow.properties.dst" and "outside the places this flow may write" in found.message
    roots(graph, everyone={"paths": [str(graph.data / "sales")], "write": True})  # neither nodes nor groups
    assert compiled(graph, body, group="marketing").hops


def test_an_unconfined_compiler_allows_any_place(graph: World) -> None:
    """The command line's own flow files are the deployment's: not confined (a flow the service stored is)."""
    assert graph.compile(listed(src="/etc", dst=str(graph.data / "anywhere"))).hops


def test_a_templates_own_default_that_makes_a_path_outside_is_refused(graph: World) -> None:
    graph.template("p/out", OUT)
    found = refused(graph, {"templateUris": ["p/out"]})
    assert found.key == "hops.out.job.copy.target" and "/tmp/engine-58-template-default" in found.message


@pytest.mark.parametrize(
    ("src", "allowed"),
    [
        pytest.param("{wh}/in/*/x.json", True, id="glob-inside"),
        pytest.param("{wh}/in/*/../../../../../etc/*.json", False, id="glob-climbs"),
        pytest.param("{wh}/in/{a,/etc}/*.json", False, id="braces-with-a-slash"),
        pytest.param("{wh}/in/{a,..}/*.json", False, id="braces-with-dots"),
        pytest.param("{wh}/_engine/state/*", False, id="glob-into-the-metadata"),
        pytest.param("{wh}/*", False, id="glob-over-the-metadata"),
    ],
)
def test_a_glob_is_checked_by_its_fixed_part_and_may_not_climb(graph: World, src: str, allowed: bool) -> None:
    graph.template("p/files", FILES)
    body = {"templateUris": ["p/files"], "properties": {"src": src.replace("{wh}", str(graph.warehouse))}}
    if allowed:
        assert compiled(graph, body).hops
    else:
        assert refused(graph, body).key == "flow.properties.src"


def test_a_warehouse_named_through_a_symbolic_link_is_its_real_place(graph: World, tmp_path: Path) -> None:
    link = tmp_path / "wh_link"
    link.symlink_to(graph.warehouse)
    body = listed(src=str(link / "in"), dst=str(link / "out"))  # a copy's paths are compiled as real paths
    assert compiled(graph, body, warehouse=link).hops
    outside = tmp_path / "outside"
    outside.mkdir()
    (graph.warehouse / "escape").symlink_to(outside)
    found = refused(graph, listed(src=str(graph.warehouse / "in"), dst=str(graph.warehouse / "escape")))
    assert (
        found.key == "flow.properties.dst" and f"would write {outside}" in found.message
    )  # (compiled as its real path)


def test_a_root_naming_an_unknown_node_is_a_topology_error(graph: World) -> None:
    roots(graph, r={"paths": ["/data"], "nodes": ["nowhere"]})
    found = graph.load_error()
    assert found.key == "roots.r.nodes[0]" and "nowhere" in found.message


def test_a_flow_the_service_stored_is_confined_when_its_execution_compiles_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An execution reads the flow from a file the service wrote under its store: compiled confined,
    so a flow stored before a limit never runs; the same flow from elsewhere is the deployment's."""
    monkeypatch.delenv("ENGINE_CONF_DIR", raising=False)
    raw = {
        **read_config(REPO / "jobs" / "flows" / "demo" / "orders_to_replica.conf"),
        "properties": {"source.path": "/etc"},
    }
    file = tmp_path / "_engine" / "service" / "runs" / "20260101T000000Z-0123abcd" / "flows" / "demo" / "x.yaml"
    with pytest.raises(ConfigError) as info:
        compile_flow(raw, choice="demo/x", file=str(file), warehouse=str(tmp_path))
    assert info.value.key == "flow.properties.source.path" and "/etc/orders.json" in info.value.message
    assert compile_flow(raw, choice="demo/x", file=None, warehouse=str(tmp_path)).hops


def test_every_plan_names_files_that_fit(world: World) -> None:
    """A hop's name is its edge's (the deployment's): with the longest flow names, a long one would
    make the runs' file names too long to create; refused naming the flow's name."""
    long_edge = "e" * 120
    world.topology("ab", {long_edge: edge("a", "b", "p/fan")})
    world.template("p/fan", FAN)
    body = flow("a", "b", datasets=["orders"])
    assert world.compile(body, group="g", name="n").hops
    with pytest.raises(ConfigError) as info:
        world.compile(body, group="g" * 32, name="n" * 64)
    assert info.value.key == "flow.flowName" and "at most 255" in info.value.message


@pytest.mark.parametrize(
    ("more", "key"),
    [
        pytest.param({"datasets": ["orders", "../x"]}, "flow.datasets[1]", id="dataset-climbs"),
        pytest.param({"datasets": ["/etc"]}, "flow.datasets[0]", id="dataset-absolute"),
        pytest.param({"catchup": "true"}, "flow.catchup", id="catchup-text"),
        pytest.param({"runImmediately": 1}, "flow.runImmediately", id="run-immediately-number"),
        pytest.param({"parallelism": 4.0}, "flow.parallelism", id="parallelism-float"),
        pytest.param({"parallelism": 10**6}, "flow.parallelism", id="parallelism-huge"),
        pytest.param({"description": "d" * 2001}, "flow.description", id="description"),
    ],
)
def test_a_flows_values_are_strict_on_the_command_line_too(graph: World, more: dict[str, Any], key: str) -> None:
    found = graph.error({**listed(src="x", dst="y"), **more})
    assert found.key == key, found.message
