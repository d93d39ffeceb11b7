"""The flow compiler (engine.flow): paths by cost, shared hops, parameters by precedence, the
errors a flow, a topology or a template pack can make, and determinism. No JVM: the topologies,
template packs and templates are written under ``tmp_path``."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.config.templates import read_config
from engine.errors import ConfigError
from engine.flow import FlowCompiler, FlowPlan, compile_flow
from engine.flow.templates import Catalog
from engine.flow.topology import Topology, load_topology

REPO = Path(__file__).resolve().parents[2]

COPY = """\
parameters { required = [source.path, destination.path] }
description = "copied"
copy { source = ${params.source.path}, target = ${params.destination.path} }
"""
"""A copy job from the hop's source node's ``path`` to its destination node's."""

LISTED = """\
parameters { required = [src, dst] }
copy { source = ${params.src}, target = ${params.dst} }
"""
"""A copy job for a flow without ``source``: its paths come from the flow's properties."""

FAN = """\
parameters { required = [source.path, destination.path, datasets] }
fan_out {
  datasets = ${params.datasets}
  template { copy { source = ${params.source.path}"/{dataset}", target = ${params.destination.path}"/{dataset}" } }
}
"""
"""A copy DAG per dataset."""

TO_DELTA = """\
parameters {
  required = [source.path, source.schemas, destination.path, datasets]
  defaults { format = json }
}
fan_out {
  datasets = ${params.datasets}
  template {
    sources {
      landing {
        type = files
        format = ${params.format}
        path = ${params.source.path}"/{dataset}."${params.format}
        schema = ${params.source.schemas}"/{dataset}.avsc"
      }
    }
    sinks { lake { type = delta, from = valid, path = ${params.destination.path}"/{dataset}" } }
  }
}
"""
"""Files of each dataset into a Delta table (a records job), as ``jobs/templates/lake/``'s."""

SCHEMA = {
    "type": "record",
    "name": "Thing",
    "fields": [{"name": "id", "type": ["null", "long"]}, {"name": "name", "type": ["null", "string"]}],
}


def hocon(body: Mapping[str, Any]) -> str:
    """``body`` as HOCON: one ``key = <json>`` line per top-level key."""
    return "".join(f"{json.dumps(k)} = {json.dumps(v, indent=1)}\n" for k, v in body.items())


def edge(frm: str, to: str, *templates: str, cost: float = 1, executors: Iterable[str] = ("local",), **extra: Any):
    return {
        "from": frm,
        "to": to,
        "templates": list(templates or ("p/copy",)),
        "executors": list(executors),
        "cost": cost,
        **extra,
    }


class World:
    """A topology folder, a template catalog and data folders under one temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topology_dir = root / "topology"
        self.templates_dir = root / "templates"
        self.data = root / "data"
        self.warehouse = root / "lake"
        self.flow_file = str(root / "flows" / "g" / "f.conf")
        for folder in (self.topology_dir, self.templates_dir, self.data, self.warehouse):
            folder.mkdir(parents=True, exist_ok=True)
        self.pack("p")
        self.template("p/copy", COPY)

    def pack(self, name: str, *, owners: Iterable[str] = (), principals: Iterable[str] | None = ("*",)) -> None:
        """A pack; ``principals=None``: no ``pack.conf`` at all."""
        folder = self.templates_dir / name
        folder.mkdir(exist_ok=True)
        if principals is not None:
            body = {"owners": list(owners), "principals": list(principals)}
            (folder / "pack.conf").write_text(hocon(body))

    def template(self, uri: str, text: str) -> Path:
        pack, name = uri.split("/")
        path = self.templates_dir / pack / f"{name}.conf"
        path.write_text(text)
        return path

    def node(self, name: str, **properties: Any) -> dict[str, Any]:
        """A folder node whose ``path`` exists."""
        path = self.data / name
        path.mkdir(exist_ok=True)
        return {"kind": "folder", "properties": {"path": str(path), **properties}}

    def topology(
        self,
        nodes: Iterable[str] | Mapping[str, Any] = (),
        edges: Mapping[str, Any] | None = None,
        *,
        file: str = "graph.conf",
        executors: Mapping[str, Any] | None = None,
    ) -> Path:
        body: dict[str, Any] = {}
        if nodes:
            body["nodes"] = dict(nodes) if isinstance(nodes, Mapping) else {n: self.node(n) for n in nodes}
        if edges:
            body["edges"] = dict(edges)
        if executors:
            body["executors"] = dict(executors)
        path = self.topology_dir / file
        path.write_text(hocon(body))
        return path

    def load(self) -> tuple[Topology, Catalog]:
        catalog = Catalog(self.templates_dir)
        return load_topology(self.topology_dir, templates=catalog.names()), catalog

    def compiler(self) -> FlowCompiler:
        graph, catalog = self.load()
        return FlowCompiler(graph, catalog, warehouse=str(self.warehouse))

    def compile(self, flow: Mapping[str, Any], *, group: str = "g", name: str = "f", **kw: Any) -> FlowPlan:
        return self.compiler().compile(flow, group=group, name=name, file=self.flow_file, **kw)

    def error(self, flow: Mapping[str, Any], **kw: Any) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            self.compile(flow, **kw)
        return info.value

    def load_error(self) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            self.load()
        return info.value


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def hop_names(plan: FlowPlan) -> list[str]:
    return [h.name for h in plan.hops]


def flow(source: str, *destinations: str, **extra: Any) -> dict[str, Any]:
    return {"source": source, "destinations": list(destinations), **extra}


# -- paths by cost ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("direct", "expected"),
    [
        (5, ["a_b", "b_c"]),  # the 2-hop path costs 2: cheaper than the direct edge
        (1.5, ["a_c"]),  # the direct edge costs less than the 2-hop path
        (2.5, ["a_b", "b_c"]),
    ],
)
def test_the_cheapest_path_wins_whatever_its_length(world: World, direct: float, expected: list[str]) -> None:
    world.topology("abc", {"a_c": edge("a", "c", cost=direct), "a_b": edge("a", "b"), "b_c": edge("b", "c")})
    plan = world.compile(flow("a", "c"))
    assert hop_names(plan) == expected
    assert plan.routes == {"c": expected}
    assert [h.edge for h in plan.hops] == expected
    first = plan.hops[0]
    assert (first.source, first.template, first.executor, first.master) == ("a", "p/copy", "local", "local[*]")
    assert plan.hops[-1].destination == "c"


def test_a_tie_in_cost_goes_to_the_path_with_fewer_hops(world: World) -> None:
    # the 2-hop path's edges sort before the direct edge: fewer hops decides before names do
    world.topology("abc", {"z_direct": edge("a", "c", cost=2), "a_b": edge("a", "b"), "b_c": edge("b", "c")})
    assert hop_names(world.compile(flow("a", "c"))) == ["z_direct"]


@pytest.mark.parametrize("winner", ["via_b", "via_c"])
def test_a_tie_in_cost_and_hops_goes_to_the_edge_names_that_sort_first(world: World, winner: str) -> None:
    # a -> b -> d and a -> c -> d cost the same; the path whose edge names sort first wins, whatever
    # the order the edges are written in
    first, second = ("e1", "e2"), ("e3", "e4")
    names_b, names_c = (first, second) if winner == "via_b" else (second, first)
    edges = {
        names_c[1]: edge("c", "d"),
        names_c[0]: edge("a", "c"),
        names_b[1]: edge("b", "d"),
        names_b[0]: edge("a", "b"),
    }
    world.topology("abcd", edges)
    plan = world.compile(flow("a", "d"))
    assert hop_names(plan) == list(first)
    assert plan.hops[0].destination == ("b" if winner == "via_b" else "c")


def test_parallel_edges_of_equal_cost_go_to_the_first_name(world: World) -> None:
    world.topology("ab", {"ab_2": edge("a", "b"), "ab_1": edge("a", "b"), "ab_0": edge("a", "b", cost=1.01)})
    assert hop_names(world.compile(flow("a", "b"))) == ["ab_1"]


# -- shared hops, multi-template edges --------------------------------------------------------------


def test_destinations_share_their_common_hop_which_runs_once(world: World) -> None:
    world.topology("abcd", {"a_b": edge("a", "b"), "b_c": edge("b", "c"), "b_d": edge("b", "d")})
    plan = world.compile(flow("a", "d", "c"))
    assert hop_names(plan) == ["a_b", "b_c", "b_d"]
    assert plan.routes == {"d": ["a_b", "b_d"], "c": ["a_b", "b_c"]}
    assert list(plan.routes) == ["d", "c"], "routes keep the flow's order of destinations"
    assert [h.after for h in plan.hops] == [(), ("a_b",), ("a_b",)]
    assert [(h.source, h.destination) for h in plan.hops] == [("a", "b"), ("b", "c"), ("b", "d")]


def test_a_destination_on_the_way_to_another_reuses_its_hop(world: World) -> None:
    world.topology("abc", {"a_b": edge("a", "b"), "b_c": edge("b", "c")})
    plan = world.compile(flow("a", "c", "b"))
    assert hop_names(plan) == ["a_b", "b_c"]
    assert plan.routes == {"c": ["a_b", "b_c"], "b": ["a_b"]}


def test_an_edge_with_several_templates_runs_them_in_order(world: World) -> None:
    for name in ("one", "two", "three"):
        world.template(f"p/{name}", COPY)
    world.pack("q")
    world.template("q/one", COPY)
    world.topology(
        "abcd",
        {
            "a_b": edge("a", "b", "p/three", "p/one", "p/two"),
            "b_c": edge("b", "c"),
            "b_d": edge("b", "d", "p/one", "q/one"),
        },
    )
    plan = world.compile(flow("a", "c", "d"))
    # the first template's hop is the edge's name (adding a template renames no hop); the others
    # add their template's name, with its pack when two packs' templates share it
    assert hop_names(plan) == ["a_b", "a_b-one", "a_b-two", "b_c", "b_d", "b_d-q-one"]
    assert [h.template for h in plan.hops] == ["p/three", "p/one", "p/two", "p/copy", "p/one", "q/one"]
    assert [h.after for h in plan.hops] == [(), ("a_b",), ("a_b-one",), ("a_b-two",), ("a_b-two",), ("b_d",)]
    assert {h.edge for h in plan.hops[:3]} == {"a_b"}
    assert plan.routes == {
        "c": ["a_b", "a_b-one", "a_b-two", "b_c"],
        "d": ["a_b", "a_b-one", "a_b-two", "b_d", "b_d-q-one"],
    }
    assert plan.hop("b_d-q-one").template_file == str(world.templates_dir / "q" / "one.conf")


def test_a_records_hop_then_a_copy_hop(world: World) -> None:
    schemas = world.data / "schemas"
    schemas.mkdir()
    (schemas / "things.avsc").write_text(json.dumps(SCHEMA))
    world.template("p/to_delta", TO_DELTA)
    world.topology(
        {"landing": world.node("landing", schemas=str(schemas)), "lake": {"kind": "lake", "properties": {"path": "t"}}},
        {"in": edge("landing", "lake", "p/to_delta"), "out": edge("lake", "replica", "p/fan")},
    )
    world.template("p/fan", FAN)
    world.topology({"replica": world.node("replica")}, file="replica.conf")
    plan = world.compile(flow("landing", "replica", datasets=["things"]))
    assert hop_names(plan) == ["in", "out"]
    landing = plan.hop("in").job["fan_out"]["template"]["sources"]["landing"]
    assert landing["path"] == f"{world.data}/landing/{{dataset}}.json"
    assert landing["schema"] == f"{schemas}/{{dataset}}.avsc"
    assert plan.hop("out").job["fan_out"]["template"]["copy"]["source"] == "t/{dataset}"
    assert [d.name for d in plan.hop("in").spec.dags] == ["things"]
    assert plan.hop("out").after == ("in",)


# -- parameters by precedence ----------------------------------------------------------------------

LAYERS = ("defaults", "node", "edge", "flow")
"""Lowest precedence first; the built-ins win over all."""
COMBOS = [c for n in range(1, len(LAYERS) + 1) for c in itertools.combinations(LAYERS, n)]


def combo_key(combo: tuple[str, ...]) -> str:
    return "k_" + "_".join(layer[0] for layer in combo)


BUILTIN_KEYS = ("warehouse", "hop", "flow.group", "flow.name", "flow.owner")


def layered(world: World) -> tuple[World, dict[str, Any]]:
    """A template and a topology where each key ``source.k_<layers>`` is set by exactly those
    layers (each to its layer's name), and the built-ins are set by the defaults, the edge and the
    flow (a node's properties only reach ``source.``/``destination.``)."""
    keys = [combo_key(c) for c in COMBOS]
    by_layer = {layer: {combo_key(c): layer for c in COMBOS if layer in c} for layer in LAYERS}
    builtins = {"warehouse": "W", "hop": "H", "flow": {"group": "G", "name": "N", "owner": "O"}}
    refs = '"|"'.join(f"${{params.source.{k}}}" for k in keys)
    builtin_refs = '"|"'.join(f"${{params.{k}}}" for k in BUILTIN_KEYS)
    defaults = {"source": by_layer["defaults"], **{k: f"defaults-{v}" for k, v in builtins.items() if k != "flow"}}
    defaults["flow"] = {k: f"defaults-{v}" for k, v in builtins["flow"].items()}
    world.template(
        "p/layers",
        "parameters {\n  required = [source.path, destination.path]\n"
        f"  defaults = {json.dumps(defaults)}\n}}\n"
        f'description = {refs}"|"{builtin_refs}\n'
        "copy { source = ${params.source.path}, target = ${params.destination.path} }\n",
    )
    nodes = {"a": world.node("a", **by_layer["node"]), "b": world.node("b", mine="b's")}
    edge_props = {"source": by_layer["edge"], "hop": "edge-H", "warehouse": "edge-W", "flow": {"group": "edge-G"}}
    world.topology(nodes, {"a_b": edge("a", "b", "p/layers", properties=edge_props)})
    flow_props: dict[str, Any] = {f"source.{k}": v for k, v in by_layer["flow"].items()}  # dotted keys
    flow_props.update({"hop": "flow-H", "flow.name": "flow-N", "flow.owner": "flow-O", "datasets": ["flow-D"]})
    return world, flow("a", "b", owner="ann", properties=flow_props)


def test_each_layer_of_parameters_wins_over_the_ones_below(world: World) -> None:
    world, raw = layered(world)
    plan = world.compile(raw)
    (hop,) = plan.hops
    expected = {combo_key(c): c[-1] for c in COMBOS}
    got = {k: v for k, v in hop.params["source"].items() if k.startswith("k_")}
    assert got == expected
    filled = hop.job["description"].split("|")[: len(COMBOS)]
    assert filled == [expected[combo_key(c)] for c in COMBOS]


def test_the_built_ins_win_over_every_layer(world: World) -> None:
    world, raw = layered(world)
    (hop,) = world.compile(raw).hops
    assert hop.params["warehouse"] == str(world.warehouse)
    assert hop.params["hop"] == "a_b"
    assert hop.params["flow"] == {"group": "g", "name": "f", "owner": "ann"}
    assert hop.job["description"].split("|")[len(COMBOS) :] == [str(world.warehouse), "a_b", "g", "f", "ann"]
    assert hop.params["datasets"] == ["flow-D"], "without the flow's `datasets` the properties give them"
    (hop,) = world.compile({**raw, "datasets": ["x", "y"]}).hops
    assert hop.params["datasets"] == ["x", "y"], "the flow's `datasets` win over any property"


def test_nodes_give_their_properties_name_and_kind_by_their_role(world: World) -> None:
    world, raw = layered(world)
    (hop,) = world.compile(raw).hops
    assert hop.params["source"]["name"] == "a" and hop.params["source"]["kind"] == "folder"
    assert hop.params["destination"] == {"name": "b", "kind": "folder", "path": str(world.data / "b"), "mine": "b's"}
    assert hop.job["copy"]["source"] == str(world.data / "a")
    assert hop.job["copy"]["target"] == str(world.data / "b")


def test_a_flow_property_overrides_a_node_path_in_the_filled_job(world: World) -> None:
    other = world.data / "elsewhere"
    other.mkdir()
    world.topology("ab", {"a_b": edge("a", "b", properties={"destination": {"path": str(world.data / "x")}})})
    (hop,) = world.compile(flow("a", "b")).hops
    assert hop.job["copy"]["target"] == str(world.data / "x"), "the edge's property beats the node's"
    (hop,) = world.compile(flow("a", "b", properties={"destination": {"path": str(other)}})).hops
    assert hop.job["copy"]["target"] == str(other), "the flow's beats the edge's"
    assert hop.params["destination"]["name"] == "b", "merged key by key: the node's other keys stay"


# -- missing parameters ----------------------------------------------------------------------------


def test_a_missing_required_parameter_is_named_by_its_key_path(world: World) -> None:
    world.template(
        "p/needs",
        COPY.replace("[source.path, destination.path]", "[source.path, destination.path, table.name]")
        + "parameters.description { table.name = the table to write }\n",
    )
    world.topology("abc", {"a_b": edge("a", "b"), "b_c": edge("b", "c", "p/needs")})
    err = world.error(flow("a", "c"))
    assert err.key == "flow.properties.table.name"
    assert err.file == world.flow_file
    assert "hop `b_c`" in err.message and "template `p/needs`" in err.message
    assert "`table.name`" in err.message and "the table to write" in err.message
    assert world.compile(flow("a", "c", properties={"table": {"name": "t"}})).hops[1].params["table"] == {"name": "t"}
    assert world.compile(flow("a", "c", properties={"table.name": "t"})).hops[1].params["table"] == {"name": "t"}


def test_a_required_parameter_a_node_would_give_is_missing_when_it_does_not(world: World) -> None:
    world.topology({"a": world.node("a"), "b": {"kind": "bucket"}}, {"a_b": edge("a", "b")})
    err = world.error(flow("a", "b"))
    assert err.key == "flow.properties.destination.path"
    assert "hop `a_b`" in err.message and "template `p/copy`" in err.message


# -- topology errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "key", "words"),
    [
        (edge("a", "zz"), "edges.bad.to", "unknown data node `zz`"),
        (edge("zz", "a"), "edges.bad.from", "unknown data node `zz`"),
        (edge("a", "a"), "edges.bad.to", "to itself"),
        (edge("a", "b", executors=["local", "big"]), "edges.bad.executors[1]", "unknown executor `big`"),
        (edge("a", "b", executors=["locl"]), "edges.bad.executors[0]", "did you mean `local`"),
        (edge("a", "b", "p/copy", "p/cpy"), "edges.bad.templates[1]", "unknown template `p/cpy`"),
        (edge("a", "b", "q/copy"), "edges.bad.templates[0]", "did you mean `p/copy`"),
    ],
)
def test_a_broken_edge_is_a_config_error_with_its_key_and_file(
    world: World, bad: dict[str, Any], key: str, words: str
) -> None:
    world.topology("ab", file="nodes.conf")
    path = world.topology({}, {"good": edge("a", "b"), "bad": bad}, file="edges.conf")
    err = world.load_error()
    assert err.key == key
    assert err.file == str(path)
    assert words in err.message


def test_the_same_name_in_two_topology_files_is_an_error(world: World) -> None:
    world.topology("ab", file="one.conf")
    second = world.topology("b", file="two.conf")
    err = world.load_error()
    assert (err.key, err.file) == ("nodes.b", str(second))
    assert "defined twice" in err.message


def test_two_edges_that_would_give_one_hop_name_are_refused(world: World) -> None:
    """Edge ``e``'s second template makes hop ``e-two``: an edge named ``e-two`` would share its
    state and lease."""
    world.template("p/two", COPY)
    graph = world.topology("abc", {"e": edge("a", "b", "p/copy", "p/two"), "e-two": edge("b", "c")})
    err = world.load_error()
    assert (err.key, err.file) == ("edges.e-two", str(graph))
    assert "edges `e` and `e-two` both give a hop named `e-two`" in err.message


@pytest.mark.parametrize("routed", [True, False], ids=["on-an-edge", "listed"])
def test_templates_that_would_name_two_hops_alike_are_refused(world: World, routed: bool) -> None:
    """``p/t`` and ``q/t`` name hops ``p-t`` and ``q-t``: a template ``r/p-t`` would be ``p-t`` too."""
    for pack in ("q", "r"):
        world.pack(pack)
    for uri in ("p/t", "q/t", "r/p-t"):
        world.template(uri, COPY)
    if routed:
        graph = world.topology("ab", {"e": edge("a", "b", "p/copy", "p/t", "q/t", "r/p-t")})
        err = world.load_error()
        assert (err.key, err.file) == ("edges.e.templates[3]", str(graph))
    else:
        world.topology("ab")
        paths = {"source.path": str(world.data / "a"), "destination.path": str(world.data / "b")}
        err = world.error({"templateUris": ["p/t", "q/t", "r/p-t"], "properties": paths})
        assert (err.key, err.file) == ("flow.templateUris[2]", world.flow_file)
    assert "templates `p/t` and `r/p-t` would both name hops `p-t`" in err.message


def test_a_template_listed_twice_on_an_edge_is_refused_with_the_topology(world: World) -> None:
    graph = world.topology("ab", {"a_b": edge("a", "b", "p/copy", "p/copy")})
    err = world.load_error()
    assert (err.key, err.file) == ("edges.a_b.templates[1]", str(graph))
    assert "listed twice" in err.message


def test_a_missing_topology_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_JOBS_DIR", raising=False)
    missing = tmp_path / "nowhere"
    raw = read_config(REPO / "jobs" / "flows" / "demo" / "orders_to_replica.conf")
    with pytest.raises(ConfigError) as info:
        compile_flow(raw, choice="demo/orders_to_replica", file=None, warehouse=str(tmp_path), topology=str(missing))
    assert info.value.key == "topology_dir" and str(missing) in info.value.message


def test_a_topology_in_json_files_is_the_same_graph(world: World) -> None:
    """JSON is read as it is: the same graph as HOCON; a ``${...}`` (which would stay text) and a
    key given twice in one object are refused."""
    world.template("p/two", COPY)
    world.topology("abcdef", TIED_EDGES)
    hocon_plan = world.compile(TIED_FLOW).describe()
    hocon_graph = world.load()[0]
    shutil.rmtree(world.topology_dir)
    world.topology_dir.mkdir()
    nodes = {n: world.node(n) for n in "abcdef"}
    (world.topology_dir / "nodes.json").write_text(json.dumps({"nodes": nodes}))
    (world.topology_dir / "edges.json").write_text(json.dumps({"edges": TIED_EDGES}, indent=2))
    json_graph = world.load()[0]
    assert (json_graph.nodes, json_graph.edges, json_graph.executors) == (
        hocon_graph.nodes,
        hocon_graph.edges,
        hocon_graph.executors,
    )
    assert world.compile(TIED_FLOW).describe() == hocon_plan
    text = {"nodes": {"g": {"kind": "lake", "properties": {"path": "${params.warehouse}/g"}}}}
    (world.topology_dir / "more.json").write_text(json.dumps(text))
    err = world.load_error()
    assert (err.key, err.file) == ("nodes.g.properties.path", str(world.topology_dir / "more.json"))
    assert "a JSON file has no substitutions" in err.message
    (world.topology_dir / "more.json").write_text('{"nodes": {"g": {"kind": "lake"}, "g": {"kind": "folder"}}}')
    err = world.load_error()
    assert err.file == str(world.topology_dir / "more.json") and "`g` is given twice" in err.message
    (world.topology_dir / "more.json").write_text('{"nodes": {"g": {"kind": "lake"},}}')
    err = world.load_error()
    assert "cannot parse JSON" in err.message and "line 1, column" in err.message


def test_an_unknown_topology_section_is_named(world: World) -> None:
    path = world.topology_dir / "graph.conf"
    path.write_text('edge { x { from = a, to = b, templates = ["p/copy"], executors = [local] } }')
    err = world.load_error()
    assert (err.key, err.file) == ("edge", str(path))
    assert "did you mean `edges`" in err.message


def test_an_unknown_node_in_the_flow_is_named_by_its_key(world: World) -> None:
    world.topology("ab", {"a_b": edge("a", "b")})
    assert world.error(flow("zz", "b")).key == "flow.source"
    err = world.error(flow("a", "b", "zz"))
    assert err.key == "flow.destinations[1]" and "unknown data node `zz`" in err.message


# -- unreachable destinations ----------------------------------------------------------------------


def test_an_unreachable_destination_names_what_is_reached_and_asks_for_an_edge(world: World) -> None:
    world.topology("abcd", {"a_b": edge("a", "b"), "c_d": edge("c", "d")})
    err = world.error(flow("a", "b", "d"))
    assert err.key == "flow.destinations[1]"
    assert err.file == world.flow_file
    assert "destination `d` cannot be reached from `a`" in err.message
    assert "the graph reaches a, b" in err.message
    assert "c_d (from c)" in err.message
    assert "an edge from one of a, b to `d` is needed" in err.message


def test_a_destination_no_edge_leads_into_says_so(world: World) -> None:
    world.topology("abc", {"a_b": edge("a", "b")})
    err = world.error(flow("a", "c"))
    assert "no edge leads into `c`" in err.message
    assert "an edge from one of a, b to `c` is needed" in err.message


# -- template packs: who may use them ---------------------------------------------------------------


def acl_world(world: World) -> World:
    world.pack("p", owners=["olga"], principals=["bob", "group:analysts"])
    world.topology("ab", {"a_b": edge("a", "b")})
    return world


def test_a_pack_refuses_a_principal_it_does_not_allow(world: World) -> None:
    acl_world(world)
    err = world.error(flow("a", "b", owner="carol"))
    assert err.key == "flow.owner"
    assert err.file == world.flow_file
    assert "principal `carol`" in err.message and "template pack `p`" in err.message
    assert "template `p/copy`" in err.message
    assert "allowed: bob, group:analysts, olga" in err.message
    assert "group `other`" not in world.error(flow("a", "b", owner="carol"), groups=("other",)).message


def test_a_flow_without_owner_needs_a_pack_open_to_anyone(world: World) -> None:
    acl_world(world)
    err = world.error(flow("a", "b"))
    assert err.key == "flow.owner" and "a flow without `owner`" in err.message


@pytest.mark.parametrize(
    ("owner", "groups"),
    [("olga", ()), ("bob", ()), ("carol", ("staff", "analysts")), (None, ("analysts",))],
)
def test_a_pack_accepts_its_owners_principals_and_groups(
    world: World, owner: str | None, groups: tuple[str, ...]
) -> None:
    acl_world(world)
    raw = flow("a", "b", **({"owner": owner} if owner else {}))
    plan = world.compile(raw, groups=groups)
    assert hop_names(plan) == ["a_b"]
    assert plan.hops[0].params["flow"]["owner"] == owner


def test_a_pack_open_to_anyone_accepts_any_flow(world: World) -> None:
    world.pack("p", owners=["olga"], principals=["*"])
    world.topology("ab", {"a_b": edge("a", "b")})
    assert hop_names(world.compile(flow("a", "b", owner="anyone"))) == ["a_b"]
    assert hop_names(world.compile(flow("a", "b"))) == ["a_b"]


def test_a_pack_without_pack_file_refuses_everyone(world: World) -> None:
    world.pack("q", principals=None)
    world.template("q/copy", COPY)
    world.topology("ab", {"a_b": edge("a", "b", "q/copy")})
    err = world.error(flow("a", "b", owner="olga"))
    assert err.key == "flow.owner"
    assert "template pack `q` has no pack file" in err.message and "principal `olga`" in err.message


# -- flows that list their templates ---------------------------------------------------------------


def listed_world(world: World) -> World:
    for name in ("one", "two", "three"):
        world.template(f"p/{name}", LISTED)
    world.topology("ab", executors={"big": {"master": "spark://big:7077"}})
    return world


def listed_flow(world: World, *uris: str, **extra: Any) -> dict[str, Any]:
    props = {"src": str(world.data / "a"), "dst": str(world.data / "b")}
    return {"templateUris": list(uris), "properties": props, **extra}


def test_a_flow_without_source_chains_its_templates_in_order_on_local(world: World) -> None:
    listed_world(world)
    plan = world.compile(listed_flow(world, "p/three", "p/one", "p/two"))
    assert hop_names(plan) == ["three", "one", "two"]
    assert [h.after for h in plan.hops] == [(), ("three",), ("one",)]
    error = world.error(listed_flow(world, "p/three", "p/one", "p/one"))
    assert error.key == "flow.templateUris[2]" and "listed twice" in error.message
    assert {(h.executor, h.master, h.edge, h.source, h.destination) for h in plan.hops} == {
        ("local", "local[*]", None, None, None)
    }
    assert plan.routes == {}
    assert plan.hops[0].job["copy"] == {"source": str(world.data / "a"), "target": str(world.data / "b")}
    assert plan.hops[0].params["hop"] == "three"


def test_a_flow_without_source_runs_on_the_executor_it_names(world: World) -> None:
    listed_world(world)
    plan = world.compile(listed_flow(world, "p/one", executor="big"))
    assert (plan.hops[0].executor, plan.hops[0].master) == ("big", "spark://big:7077")
    err = world.error(listed_flow(world, "p/one", executor="huge"))
    assert err.key == "flow.executor" and "unknown executor `huge`" in err.message


def test_a_flow_without_source_names_an_unknown_template_by_its_index(world: World) -> None:
    listed_world(world)
    err = world.error(listed_flow(world, "p/one", "p/tow"))
    assert err.key == "flow.templateUris[1]"
    assert "unknown template `p/tow`" in err.message and "did you mean `p/two`" in err.message


def test_a_flow_needs_a_source_or_template_uris(world: World) -> None:
    listed_world(world)
    assert world.error({"destinations": ["b"]}).key == "flow.source"
    assert world.error({}).key == "flow.source"


def test_template_uris_restrict_the_edges_a_routed_flow_may_take(world: World) -> None:
    world.template("p/fast", COPY)
    world.template("p/slow", COPY)
    world.topology(
        "abc",
        {"a_b": edge("a", "b", "p/fast"), "b_c": edge("b", "c", "p/fast"), "a_c": edge("a", "c", "p/slow", cost=10)},
    )
    assert hop_names(world.compile(flow("a", "c"))) == ["a_b", "b_c"]
    assert hop_names(world.compile(flow("a", "c", templateUris=["p/slow"]))) == ["a_c"]
    assert hop_names(world.compile(flow("a", "c", templateUris=["p/fast", "p/slow"]))) == ["a_b", "b_c"]
    err = world.error(flow("a", "c", templateUris=["p/copy"]))
    assert err.key == "flow.destinations[0]"
    assert "the graph reaches a;" in err.message
    assert "the edges a_c lead there but use templates not in `templateUris`" in err.message


def test_an_edge_is_usable_only_when_all_its_templates_are_listed(world: World) -> None:
    world.template("p/fast", COPY)
    world.template("p/check", COPY)
    world.topology("ab", {"a_b": edge("a", "b", "p/fast", "p/check"), "a_b_slow": edge("a", "b", cost=9)})
    assert hop_names(world.compile(flow("a", "b"))) == ["a_b", "a_b-check"]
    assert hop_names(world.compile(flow("a", "b", templateUris=["p/fast", "p/copy"]))) == ["a_b_slow"]


# -- the flow's key -------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [("flowGroup", "other"), ("flowName", "other")])
def test_a_flow_group_or_name_that_differs_from_the_file_place_is_refused(world: World, key: str, value: str) -> None:
    world.topology("ab", {"a_b": edge("a", "b")})
    err = world.error(flow("a", "b", **{key: value}))
    assert err.key == f"flow.{key}"
    assert err.file == world.flow_file
    assert f"`{value}` differs" in err.message


def test_a_flow_group_and_name_that_match_are_accepted(world: World) -> None:
    world.topology("ab", {"a_b": edge("a", "b")})
    plan = world.compile(flow("a", "b", flowGroup="g", flowName="f"))
    assert (plan.group, plan.name, plan.job_name) == ("g", "f", "flow.g.f")


# -- determinism --------------------------------------------------------------------------------------

TIED_EDGES = {
    "a_b": edge("a", "b"),
    "a_c": edge("a", "c"),
    "b_d": edge("b", "d", "p/copy", "p/two"),
    "c_d": edge("c", "d"),
    "d_e": edge("d", "e", cost=0.5),
    "b_e": edge("b", "e", cost=2.5),
    "c_e": edge("c", "e", cost=2.5),
    "a_e": edge("a", "e", cost=3),
    "e_f": edge("e", "f"),
    "c_f": edge("c", "f", cost=3),
}
"""Many ties: any dependence on the order edges are read in would show."""
TIED_FLOW = flow("a", "f", "d", "e", datasets=["x"], properties={"extra": 1})


def test_compiling_twice_gives_the_same_plan(world: World) -> None:
    world.template("p/two", COPY)
    world.topology("abcdef", TIED_EDGES)
    compiler = world.compiler()
    first = compiler.compile(TIED_FLOW, group="g", name="f", file=world.flow_file).describe()
    second = compiler.compile(TIED_FLOW, group="g", name="f", file=world.flow_file).describe()
    assert first == second
    assert json.dumps(first, sort_keys=False) == json.dumps(second, sort_keys=False)
    assert world.compile(TIED_FLOW).describe() == first, "a fresh compiler, topology and catalog too"
    assert first["routes"] == {
        "f": ["a_b", "b_d", "b_d-two", "d_e", "e_f"],
        "d": ["a_b", "b_d", "b_d-two"],
        "e": ["a_b", "b_d", "b_d-two", "d_e"],
    }


def test_the_plan_does_not_depend_on_how_the_topology_files_are_written(world: World) -> None:
    world.template("p/two", COPY)
    names = list(TIED_EDGES)
    plans = []
    orders = []
    for variant in range(2):
        shutil.rmtree(world.topology_dir)
        world.topology_dir.mkdir()
        halves = [names[: len(names) // 2], names[len(names) // 2 :]]
        if variant:  # the files made in the other order, each holding the other half, reversed
            halves = [list(reversed(h)) for h in reversed(halves)]
            world.topology({}, {n: TIED_EDGES[n] for n in halves[1]}, file="3.conf")
            world.topology({}, {n: TIED_EDGES[n] for n in halves[0]}, file="2.conf")
            world.topology(list(reversed("abcdef")), file="1.conf")
        else:
            world.topology("abcdef", file="1.conf")
            world.topology({}, {n: TIED_EDGES[n] for n in halves[0]}, file="2.conf")
            world.topology({}, {n: TIED_EDGES[n] for n in halves[1]}, file="3.conf")
        graph, _ = world.load()
        orders.append((list(graph.nodes), list(graph.edges)))
        plans.append(world.compile(TIED_FLOW).describe())
    assert orders[0] != orders[1], "the two topologies are read in different orders"
    assert plans[0] == plans[1]


# -- the flow as one job ----------------------------------------------------------------------------


def dag_world(world: World) -> FlowPlan:
    world.template("p/fan", FAN)
    world.template("p/two", COPY)
    world.topology(
        "abcd",
        {"a_b": edge("a", "b", "p/fan", "p/two"), "b_c": edge("b", "c", "p/fan"), "b_d": edge("b", "d")},
    )
    return world.compile(flow("a", "c", "d", datasets=["x", "y"], parallelism=3, description="moves"))


def test_the_job_spec_renames_each_hop_dags_and_orders_them_after_the_hops_before(world: World) -> None:
    plan = dag_world(world)
    assert hop_names(plan) == ["a_b", "a_b-two", "b_c", "b_d"]
    spec = plan.job_spec()
    assert (spec.name, spec.parallelism, spec.description) == ("flow.g.f", 3, "moves")
    assert spec.warehouse == str(world.warehouse)
    assert [(d.name, d.after) for d in spec.dags] == [
        ("a_b.x", ()),
        ("a_b.y", ()),
        ("a_b-two", ("a_b.x", "a_b.y")),
        ("b_c.x", ("a_b-two",)),
        ("b_c.y", ("a_b-two",)),
        ("b_d", ("a_b-two",)),
    ]
    assert plan.hop("a_b").dag_names() == {"x": "a_b.x", "y": "a_b.y"}


def test_the_job_spec_of_some_hops_drops_the_dependencies_on_the_others(world: World) -> None:
    plan = dag_world(world)
    spec = plan.job_spec(["b_d", "b_c"])
    assert [(d.name, d.after) for d in spec.dags] == [("b_c.x", ()), ("b_c.y", ()), ("b_d", ())]
    spec = plan.job_spec(["a_b-two", "b_d"])
    assert [(d.name, d.after) for d in spec.dags] == [("a_b-two", ()), ("b_d", ("a_b-two",))]
    assert [d.name for d in plan.job_spec([]).dags] == []


def test_an_unknown_hop_is_named_with_the_flow_hops(world: World) -> None:
    plan = dag_world(world)
    with pytest.raises(ConfigError) as info:
        plan.hop("zz")
    assert info.value.key == "hop"
    assert "a_b, a_b-two, b_c, b_d" in info.value.message


def test_describe_shows_each_hop(world: World) -> None:
    plan = dag_world(world)
    described = plan.describe()
    assert (described["flowGroup"], described["flowName"], described["job"]) == ("g", "f", "flow.g.f")
    assert [h["hop"] for h in described["hops"]] == hop_names(plan)
    assert described["hops"][0]["dags"] == ["a_b.x", "a_b.y"]
    assert described["hops"][2] == {
        "hop": "b_c",
        "edge": "b_c",
        "from": "b",
        "to": "c",
        "template": "p/fan",
        "template_file": str(world.templates_dir / "p" / "fan.conf"),
        "executor": "local",
        "master": "local[*]",
        "after": ["a_b-two"],
        "dags": ["b_c.x", "b_c.y"],
        "job": plan.hop("b_c").job,
    }


# -- the demo ---------------------------------------------------------------------------------------


def test_the_demo_flow_compiles_into_two_hops_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_JOBS_DIR", raising=False)
    monkeypatch.delenv("ENGINE_CONF_DIR", raising=False)
    file = REPO / "jobs" / "flows" / "demo" / "orders_to_replica.conf"
    raw = read_config(file)
    plan = compile_flow(raw, choice="demo/orders_to_replica", file=str(file), warehouse=str(tmp_path))
    assert hop_names(plan) == ["demo_landing_to_lake", "demo_lake_to_replica"]
    assert [h.template for h in plan.hops] == ["lake/files_to_delta", "lake/table_copy"]
    assert [h.after for h in plan.hops] == [(), ("demo_landing_to_lake",)]
    assert plan.routes == {"demo_replica": ["demo_landing_to_lake", "demo_lake_to_replica"]}
    copy = plan.hops[1].job["fan_out"]["template"]["copy"]
    assert copy["source"] == f"{tmp_path}/lake/{{dataset}}"
    assert copy["target"] == f"{tmp_path}/replica/{{dataset}}"
    assert [(d.name, d.after) for d in plan.job_spec().dags] == [
        ("demo_landing_to_lake.orders", ()),
        ("demo_lake_to_replica.orders", ("demo_landing_to_lake.orders",)),
    ]


def test_a_demo_flow_choice_needs_a_group(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        compile_flow({}, choice="orders_to_replica", file=None, warehouse=str(tmp_path))
    assert info.value.key == "flow"


def test_compiling_a_flow_imports_no_pyspark(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from engine.config.templates import read_config\n"
        "from engine.flow import compile_flow\n"
        f"file = {str(REPO / 'jobs' / 'flows' / 'demo' / 'orders_to_replica.conf')!r}\n"
        f"compile_flow(read_config(__import__('pathlib').Path(file)), choice='demo/orders_to_replica', file=file, "
        f"warehouse={str(tmp_path)!r}).job_spec()\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'pyspark'], 'pyspark imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ENGINE_JOBS_DIR", "ENGINE_CONF_DIR")}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- what reviews found -----------------------------------------------------------------------------


def test_decimal_costs_that_sum_equal_tie_and_the_shorter_path_wins(world: World) -> None:
    """0.1 + 0.7 is 0.7999999999999999 in floating point; the compiler sums in billionths."""
    world.topology(
        "abc", {"a_c": edge("a", "c", cost=0.8), "a_b": edge("a", "b", cost=0.1), "b_c": edge("b", "c", cost=0.7)}
    )
    assert hop_names(world.compile(flow("a", "c"))) == ["a_c"]


def test_a_template_name_that_cannot_name_a_hop_is_refused(world: World) -> None:
    world.template("p/fan.x", COPY)
    world.topology("ab", {"a_b": edge("a", "b")})
    error = world.load_error()
    assert "template `fan.x`" in error.message and error.file and error.file.endswith("fan.x.conf")


def test_parameters_that_use_substitutions_are_refused_clearly(world: World) -> None:
    world.template(
        "p/sub", 'parameters { defaults { target = ${params.warehouse}"/out" } }\ncopy { source = /a, target = /b }\n'
    )
    world.topology("ab", {"a_b": edge("a", "b", "p/sub")})
    error = world.error(flow("a", "b"))
    assert "`parameters` cannot use substitutions" in error.message and error.key == "parameters"


def test_a_template_reading_a_parameter_no_one_gives_names_the_hop(world: World) -> None:
    world.template("p/typo", "copy { source = ${params.source.path}, target = ${params.destination.paht} }\n")
    world.topology("ab", {"a_b": edge("a", "b", "p/typo")})
    error = world.error(flow("a", "b"))
    assert error.message.startswith("hop `a_b`: template `p/typo`")
    assert "params.destination.paht" in error.message and error.key == "hops.a_b"
    assert error.file == world.flow_file


def test_a_node_property_cannot_hide_the_node_name_or_kind(world: World) -> None:
    nodes = {"a": {**world.node("a"), "properties": {**world.node("a")["properties"], "name": "x", "kind": "y"}}}
    world.topology({**nodes, "b": world.node("b")}, {"a_b": edge("a", "b")})
    params = world.compile(flow("a", "b")).hops[0].params
    assert (params["source"]["name"], params["source"]["kind"]) == ("a", "folder")


def test_an_unknown_template_in_template_uris_of_a_routed_flow_is_named(world: World) -> None:
    world.topology("ab", {"a_b": edge("a", "b")})
    error = world.error(flow("a", "b", templateUris=["p/copy", "p/cpoy"]))
    assert error.key == "flow.templateUris[1]" and "did you mean `p/copy`" in error.message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('a = ${params.x}"/{dataset}."${params.f}\n', id="concatenation"),
        pytest.param('a = "x" ${params.x} z ${params.n}\n', id="whitespace-kept"),
        pytest.param("a = ${params.n}\nb = ${params.flag}\nc = ${params.list}\nd = ${params.obj}\n", id="types-kept"),
        pytest.param("a = ${?params.missing}\nb = ${?params.missing} ${params.x}\n", id="optional"),
        pytest.param("a { b = [${params.x}, 2, ${params.n}] }\n", id="lists"),
        pytest.param("a = ${params.nothing}\nb = 1\n", id="null-drops-the-key"),
        pytest.param("a = ${params.obj} { k = 2 }\n", id="object-merge-left-to-pyhocon"),
        pytest.param("a = ${?HOME}\nb = ${a}\n", id="environment-and-self-reference"),
        pytest.param('{"a": ${params.x}, "b": {"c": ${params.n}}}\n', id="root-braces"),
        pytest.param('a { "fs.s3a.endpoint" = ${params.x}, b.c = 1 }\n', id="quoted-dotted-keys"),
    ],
)
def test_a_template_parsed_once_fills_exactly_as_pyhocon_does(tmp_path: Path, text: str) -> None:
    from engine.config.templates import ParsedTemplate, fill_template

    path = tmp_path / "t.conf"
    path.write_text(text)
    params = {
        "x": "/data",
        "f": "json",
        "n": 3,
        "flag": True,
        "list": ["a", "b"],
        "obj": {"k": 1, "j": "v"},
        "nothing": None,
    }
    assert ParsedTemplate(path).fill(params) == fill_template(path, params)


def test_adding_a_dataset_renames_no_dag_so_no_state_is_lost(world: World) -> None:
    """DAGs key their state by name: a fan-out hop's DAGs are ``<hop>.<dataset>`` for one dataset
    as for several."""
    world.template("p/fan", FAN)
    world.topology("ab", {"a_b": edge("a", "b", "p/fan")})
    one = world.compile(flow("a", "b", datasets=["x"])).job_spec()
    two = world.compile(flow("a", "b", datasets=["x", "y"])).job_spec()
    assert [d.name for d in one.dags] == ["a_b.x"] and [d.name for d in two.dags] == ["a_b.x", "a_b.y"]


def test_maps_inside_parameter_values_keep_their_dotted_keys(world: World) -> None:
    nodes = {"a": world.node("a", options={"fs.s3a.endpoint": "http://x"}), "b": world.node("b")}
    world.topology(nodes, {"a_b": edge("a", "b")})
    plan = world.compile(flow("a", "b", properties={"destination.path": "/elsewhere", "extra": {"spark.sql.x": 1}}))
    params = plan.hops[0].params
    assert params["source"]["options"] == {"fs.s3a.endpoint": "http://x"}
    assert params["extra"] == {"spark.sql.x": 1} and params["destination"]["path"] == "/elsewhere"


def test_a_flow_group_or_name_that_cannot_name_a_job_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="letters, digits") as info:
        compile_flow({}, choice="a.b/c", file=None, warehouse=str(tmp_path))
    assert info.value.key == "flow"


# -- a compiler keeps what it compiled --------------------------------------------------------------

NAMED = """\
parameters { required = [source.path, destination.path] }
copy {
  source = ${params.source.path}
  target = ${params.destination.path}
  datasets { type = recursive, name = ${params.flow.name}"-"${params.hop} }
}
"""
"""A copy job that differs in every flow: it reads the flow's name."""


def kept_world(world: World) -> list[tuple[str, str, dict[str, Any]]]:
    """A graph whose flows share some hops and not others, and the flows: (group, name, flow)."""
    schemas = world.data / "schemas"
    schemas.mkdir()
    (schemas / "things.avsc").write_text(json.dumps(SCHEMA))
    world.template("p/to_delta", TO_DELTA)
    world.template("p/fan", FAN)
    world.template("p/named", NAMED)
    lake = {"kind": "lake", "properties": {"path": "t"}}
    world.topology(
        {"landing": world.node("landing", schemas=str(schemas)), "lake": lake, **{n: world.node(n) for n in "abc"}},
        {
            "in": edge("landing", "lake", "p/to_delta"),
            "lake_a": edge("lake", "a", "p/fan"),
            "a_b": edge("a", "b", "p/copy", "p/named"),
            "b_c": edge("b", "c", cost=2),
            "a_c": edge("a", "c", "p/named", cost=4),
        },
    )
    return [
        ("g", "one", flow("landing", "a", "c", datasets=["things"])),
        ("g", "two", flow("landing", "b", datasets=["things"], properties={"format": "json"})),
        ("h", "one", flow("a", "c")),
        ("h", "two", flow("a", "b", "c")),
        ("g", "three", flow("a", "c", properties={"extra": 1})),
    ]


def test_a_compiler_that_keeps_its_hops_gives_the_plans_a_new_compiler_gives(world: World) -> None:
    flows = kept_world(world)
    shared = world.compiler()
    for _ in range(2):  # the second time round, every hop was compiled before
        for group, name, body in flows:
            kept = shared.compile(body, group=group, name=name, file=world.flow_file)
            fresh = world.compile(body, group=group, name=name)
            assert kept.describe() == fresh.describe()
            assert [(h.name, h.spec, h.params) for h in kept.hops] == [(h.name, h.spec, h.params) for h in fresh.hops]
            assert kept.job_spec() == fresh.job_spec()
    one = shared.compile(flows[0][2], group="g", name="one", file=world.flow_file)
    assert one.hop("in").spec.name == "flow.g.one.in"
    (dag,) = one.hop("lake_a").spec.dags
    assert dag.manifests_dir.endswith("/_engine/copy_manifests/flow.g.one.lake_a")  # type: ignore[union-attr]


def test_a_hop_met_again_is_not_compiled_again(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.flow.compiler as compiler_module

    flows = kept_world(world)
    compiled: list[str] = []
    real = compiler_module.compile_job

    def counting(raw: dict[str, Any], **kw: Any) -> Any:
        compiled.append(kw["name"])
        return real(raw, **kw)

    monkeypatch.setattr(compiler_module, "compile_job", counting)
    shared = world.compiler()
    shared.compile(flows[2][2], group="h", name="one", file=world.flow_file)  # a_b, a_b-named, b_c
    assert len(compiled) == 3
    shared.compile(flows[3][2], group="h", name="two", file=world.flow_file)  # the same hops
    assert len(compiled) == 4, "only the hop that reads the flow's name is new"
    shared.compile(flows[3][2], group="h", name="two", file=world.flow_file)
    assert len(compiled) == 4, "the same flow again: nothing"
    elsewhere = str(world.root / "flows" / "other" / "f.conf")
    shared.compile(flows[2][2], group="h", name="one", file=elsewhere)
    assert len(compiled) == 7, "another folder reads relative paths elsewhere: compiled again"
    assert set(compiled) == {"@hop@"}


def test_a_hop_whose_job_holds_the_keeping_name_is_compiled_under_its_own(world: World) -> None:
    world.template("p/odd", COPY.replace('description = "copied"', 'description = "@hop@ in text"'))
    world.topology("ab", {"a_b": edge("a", "b", "p/odd")})
    compiler = world.compiler()
    for name in ("f", "g"):
        plan = compiler.compile(flow("a", "b"), group="g", name=name, file=world.flow_file)
        assert plan.hop("a_b").spec.name == f"flow.g.{name}.a_b"
        assert plan.hop("a_b").spec == world.compile(flow("a", "b"), name=name).hop("a_b").spec


def test_an_error_compiling_a_hop_names_the_hop_not_the_keeping_name(world: World) -> None:
    world.template("p/bad", COPY.replace("copy {", "copy { verify.checksum = sha3,"))
    world.topology("ab", {"a_b": edge("a", "b", "p/bad")})
    compiler = world.compiler()
    with pytest.raises(ConfigError) as info:
        compiler.compile(flow("a", "b"), group="g", name="f", file=world.flow_file)
    assert info.value.key == "hops.a_b.job.copy.verify.checksum"
    assert "@hop@" not in info.value.message and "hop `a_b`" in info.value.message


def test_a_compiler_keeps_a_bounded_number_of_hops(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.flow.compiler as compiler_module

    monkeypatch.setattr(compiler_module, "KEPT_HOPS", 3)
    world.template("p/named", NAMED)
    world.topology("ab", {"a_b": edge("a", "b", "p/named")})
    compiler = world.compiler()
    for i in range(6):
        plan = compiler.compile(flow("a", "b"), group="g", name=f"f{i}", file=world.flow_file)
        assert plan.hop("a_b").job["copy"]["datasets"]["name"] == f"f{i}-a_b"
    assert len(compiler._kept) == 3


def test_the_inputs_of_a_template_are_the_parameters_it_reads(tmp_path: Path) -> None:
    from engine.config.templates import ParsedTemplate

    path = tmp_path / "t.conf"
    path.write_text('a = ${params.x}"/"${params.y.z}\nb = ${?params.maybe}\n')
    parsed = ParsedTemplate(path)
    base = {"x": "/data", "y": {"z": 1, "unread": 2}}
    assert parsed.inputs(base) == parsed.inputs({**base, "other": 3, "y": {"z": 1}})
    assert parsed.inputs(base) != parsed.inputs({**base, "x": "/elsewhere"})
    assert parsed.inputs(base) != parsed.inputs({**base, "y": {"z": "1"}}), "a number is not its text"
    assert parsed.inputs(base) != parsed.inputs({**base, "maybe": None}), "given as null is not missing"
    path.write_text("a = ${?HOME}\nb = ${params.x}\n")
    assert ParsedTemplate(path).inputs(base) is None, "filled by pyhocon: no list of reads"
    yaml = tmp_path / "t.yaml"
    yaml.write_text("a: ${params.x}\n")
    assert ParsedTemplate(yaml).inputs(base) is None


def test_a_parameter_read_through_a_dotted_key_is_not_kept_as_missing(world: World) -> None:
    """``${params.s3.fs.endpoint}`` misses in ``{"s3": {"fs.endpoint": x}}`` for the compiled
    filler, and pyhocon finds it: two flows that differ only there get their own jobs."""
    world.template(
        "p/s3",
        "copy { source = ${params.source.path}, target = ${params.destination.path}\n"
        "  target_options { endpoint = ${params.s3.fs.endpoint} } }\n",
    )
    world.topology("ab", {"a_b": edge("a", "b", "p/s3")})
    compiler = world.compiler()
    for name in ("one", "two"):
        body = flow("a", "b", properties={"s3": {"fs.endpoint": f"http://{name}:9000"}})
        hop = compiler.compile(body, group="g", name=name, file=world.flow_file).hop("a_b")
        assert hop.job["copy"]["target_options"] == {"endpoint": f"http://{name}:9000"}
        assert hop.spec.dags[0].copy.target_options == {"endpoint": f"http://{name}:9000"}  # type: ignore[union-attr]


def test_two_jobs_that_prepare_alike_keep_their_own_configs(world: World) -> None:
    """``prepare`` may make two configs one (two encryptions of one secret decrypt alike): each hop
    still shows its own config, and the compiled job is shared."""
    (world.templates_dir / "p" / "y.yaml").write_text(
        "parameters: {required: [src, dst]}\n"
        "copy:\n  source: ${params.src}\n  target: ${params.dst}\n  source_options:\n    password: ${params.pw}\n"
    )
    world.topology("ab", {"a_b": edge("a", "b")})
    graph, catalog = world.load()

    def reveal(job: dict[str, Any]) -> dict[str, Any]:
        options = {**job["copy"]["source_options"], "password": "s3cret"}
        return {**job, "copy": {**job["copy"], "source_options": options}}

    compiler = FlowCompiler(graph, catalog, warehouse=str(world.warehouse), prepare=reveal)
    paths = {"src": str(world.data / "a"), "dst": str(world.data / "b")}
    for name, token in (("one", "ENC(token-1)"), ("two", "ENC(token-2)")):
        body = {"templateUris": ["p/y"], "properties": {**paths, "pw": token}}
        (hop,) = compiler.compile(body, group="g", name=name, file=world.flow_file).hops
        assert hop.job["copy"]["source_options"]["password"] == token
        assert hop.spec.dags[0].copy.source_options == {"password": "s3cret"}  # type: ignore[union-attr]
        assert hop.spec.name == f"flow.g.{name}.y"
