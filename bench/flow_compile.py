"""Benchmark: the flow compiler (``engine.flow``) over a large flow graph, as a flow service runs it.

Run from the repository root (after ``bash scripts/bootstrap.sh``)::

    .venv/bin/python bench/flow_compile.py                        # 100 nodes, 300 edges, 1,000 flows
    .venv/bin/python bench/flow_compile.py --flows 200 --profile  # where the time goes (cProfile)
    .venv/bin/python bench/flow_compile.py --topology-format json # the graph in JSON files

Builds, in a temporary directory, a seeded pseudo-random flow graph: ``--nodes`` data nodes (each a
folder that exists), ``--edges`` flow edges (a directed ring through every node, so that every node
reaches every other, plus random chords; costs from 0.5 to 10; one edge in ten runs two templates),
three executors, spread over several topology files (HOCON, or JSON with ``--topology-format``);
and one template pack of cheap copy templates
(``copy { source = ${params.source.path}, target = ${params.destination.path} }``). No Spark.

The topology is loaded once (timed apart: ``load``), then ``--flows`` flows (seeded: a random
source, one to three other destinations, one or two datasets) are compiled, each into its hops: the
cheapest paths, every hop's template filled and compiled with ``engine.spec.compile_job``. That is
done ``--rounds`` times, each by a new ``FlowCompiler`` over a new template catalog, so every round
starts cold (templates parsed, nothing compiled or resolved yet) as a new flow service does; a
compiler keeps what it compiled, so hops met again in later flows cost less. Each plan is checked
(a route per destination, ending on an edge into it; one DAG per hop in its ``job_spec()``),
outside the timing.

Prints the load time, each round's compile time, and for the median round flows/s, hops compiled,
the median and p95 per-flow milliseconds, and whether the goal (``--goal``, 2 s for the 1,000
flows, judged on the median round) is met. ``--profile`` runs one more cold round under cProfile
and prints the functions that take the time. The last stdout line is JSON. Exit code: 0, or 1 if a
plan is wrong (not if the goal is missed).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.flow import FlowCompiler, FlowPlan  # noqa: E402
from engine.flow.templates import Catalog  # noqa: E402
from engine.flow.topology import load_topology  # noqa: E402

PACK = "bench"
TEMPLATES = {
    "copy": "",
    "copy_checked": "verify.checksum = ${params.checksum}",
    "copy_named": 'datasets { type = recursive, name = ${params.flow.name}"-"${params.hop} }',
}
"""Cheap templates: a copy job each (the fastest kind to compile), reading the nodes' paths."""
EXECUTORS = {
    "local": {"master": "local[*]"},
    "cluster": {"master": "spark://bench:7077", "submit": ["--total-executor-cores", "4"]},
    "yarn": {"master": "yarn"},
}
EDGE_FILES = 4


def hocon(body: dict[str, Any]) -> str:
    """``body`` as HOCON, one ``key = <json>`` line per top-level key."""
    return "".join(f"{json.dumps(k)} = {json.dumps(v, indent=1)}\n" for k, v in body.items())


def template_text(extra: str) -> str:
    return (
        "parameters {\n"
        "  required = [source.path, destination.path]\n"
        "  defaults { checksum = sha256 }\n"
        "}\n"
        'description = "a bench hop"\n'
        f"copy {{ source = ${{params.source.path}}, target = ${{params.destination.path}}, {extra} }}\n"
    )


def write(folder: Path, stem: str, body: dict[str, Any], fmt: str) -> None:
    text = json.dumps(body, indent=1) if fmt == "json" else hocon(body)
    (folder / f"{stem}.{fmt}").write_text(text)


def build(root: Path, nodes: int, edges: int, rng: random.Random, fmt: str = "conf") -> tuple[Path, Path, list[str]]:
    """The topology folder, the templates folder and the node names."""
    topology, templates, data = root / "topology", root / "templates", root / "data"
    for folder in (topology, templates / PACK, data):
        folder.mkdir(parents=True)
    (templates / PACK / "pack.conf").write_text(hocon({"owners": ["platform"], "principals": ["*"]}))
    for name, extra in TEMPLATES.items():
        (templates / PACK / f"{name}.conf").write_text(template_text(extra))
    names = [f"n{i:03d}" for i in range(nodes)]
    node_confs: dict[str, Any] = {}
    for name in names:
        (data / name).mkdir()
        node_confs[name] = {"kind": rng.choice(["folder", "lake", "bucket"]), "properties": {"path": str(data / name)}}
    pairs = [(names[i], names[(i + 1) % nodes]) for i in range(nodes)]  # the ring
    while len(pairs) < edges:  # the chords (a pair may have several edges, as parallel routes)
        a, b = rng.sample(names, 2)
        pairs.append((a, b))
    edge_confs: dict[str, Any] = {}
    for i, (a, b) in enumerate(pairs):
        uris = [f"{PACK}/{t}" for t in rng.sample(sorted(TEMPLATES), 2 if rng.random() < 0.1 else 1)]
        executors = rng.sample(sorted(EXECUTORS), rng.choice([1, 1, 2]))
        body: dict[str, Any] = {
            "from": a,
            "to": b,
            "templates": uris,
            "executors": executors,
            "cost": round(rng.uniform(0.5, 10), 1),
        }
        if rng.random() < 0.2:
            body["properties"] = {"checksum": rng.choice(["md5", "sha1", "crc32"])}
        edge_confs[f"e{i:03d}_{a}_{b}"] = body
    write(topology, "nodes", {"nodes": node_confs}, fmt)
    write(topology, "executors", {"executors": EXECUTORS}, fmt)
    keys = list(edge_confs)
    rng.shuffle(keys)
    for f in range(EDGE_FILES):
        part = {k: edge_confs[k] for k in keys[f::EDGE_FILES]}
        write(topology, f"edges-{f}", {"edges": part}, fmt)
    return topology, templates, names


def make_flows(count: int, names: list[str], rng: random.Random) -> list[dict[str, Any]]:
    flows = []
    for i in range(count):
        source, *destinations = rng.sample(names, 1 + rng.choice([1, 1, 2, 3]))
        flow: dict[str, Any] = {
            "description": f"bench flow {i}",
            "owner": rng.choice(["ann", "bob", "carol"]),
            "source": source,
            "destinations": destinations,
            "datasets": [f"d{j}" for j in range(rng.choice([1, 2]))],
        }
        if rng.random() < 0.3:
            flow["properties"] = {"checksum": "sha256"}
        flows.append(flow)
    return flows


def check(plan: FlowPlan, flow: dict[str, Any]) -> str | None:
    """What is wrong with ``plan``, or None."""
    by_name = {h.name: h for h in plan.hops}
    if list(plan.routes) != flow["destinations"]:
        return f"routes {list(plan.routes)} != destinations {flow['destinations']}"
    for dest, route in plan.routes.items():
        if not route or by_name[route[-1]].destination != dest or by_name[route[0]].source != flow["source"]:
            return f"route to {dest} is {route}"
    dags = plan.job_spec().dags
    if len(dags) != len(plan.hops) or len({d.name for d in dags}) != len(dags):
        return f"{len(dags)} DAGs for {len(plan.hops)} hops"
    return None


def compile_all(compiler: FlowCompiler, flows: list[dict[str, Any]]) -> tuple[list[float], list[FlowPlan]]:
    seconds, plans = [], []
    for i, flow in enumerate(flows):
        start = time.perf_counter()
        plan = compiler.compile(flow, group="bench", name=f"flow{i:04d}", file=None)
        seconds.append(time.perf_counter() - start)
        plans.append(plan)
    return seconds, plans


PARTS = (
    ("FlowConf validated", "engine/spec/validation.py", "validate", "compiler.py:_plan"),
    ("cheapest paths (Dijkstra)", "engine/flow/compiler.py", "_cheapest", None),
    ("  of which Topology.outgoing", "engine/flow/topology.py", "outgoing", None),
    ("hop parameters merged", "engine/flow/compiler.py", "_params", None),
    ("template filled", "engine/flow/templates.py", "fill", None),
    ("templates parsed (pyhocon)", "pyhocon/config_parser.py", "parse_string", None),
    ("hop job kept or compiled", "engine/flow/compiler.py", "_job", None),
    ("  of which compile_job", "engine/spec/compile.py", "compile_job", None),
    ("  of which renamed", "engine/spec/compile.py", "renamed", None),
)
"""What ``--profile`` sums up: (label, file suffix, function, the caller that counts or None)."""


def profile(compiler: FlowCompiler, flows: list[dict[str, Any]], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    compile_all(compiler, flows)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, _, ct, _) in raw.values())
    out.write(f"where the time goes (cProfile, {len(flows)} flows, {total:.2f} s profiled):\n")
    for label, suffix, function, caller in PARTS:
        cumulative = 0.0
        for (file, _, name), (_, _, _, ct, callers) in raw.items():
            if name != function or not file.endswith(suffix):
                continue
            if caller is None:
                cumulative += ct
            else:  # only the time spent when called from ``caller`` (file:function)
                where, what = caller.split(":")
                cumulative += sum(c[3] for (f, _, n), c in callers.items() if f.endswith(where) and n == what)
        out.write(f"  {label:<34} {cumulative:8.3f} s  {100 * cumulative / total:5.1f}%\n")
    stats.strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--edges", type=int, default=300)
    parser.add_argument("--flows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--topology-format", choices=["conf", "json"], default="conf", help="the topology files'")
    parser.add_argument("--goal", type=float, default=2.0, help="seconds for all the flows")
    parser.add_argument("--rounds", type=int, default=3, help="cold rounds (a new compiler each); the median is judged")
    parser.add_argument("--profile", action="store_true", help="then profile the compile loop (cProfile)")
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.edges < args.nodes:
        parser.error("--edges must be at least --nodes (the ring)")

    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="engine-flow-bench-"))
    try:
        topology_dir, templates_dir, names = build(root, args.nodes, args.edges, rng, args.topology_format)
        flows = make_flows(args.flows, names, rng)

        start, load_cpu = time.perf_counter(), time.process_time()
        graph = load_topology(topology_dir, templates=Catalog(templates_dir).names())
        load, load_cpu = time.perf_counter() - start, time.process_time() - load_cpu
        print(
            f"graph: {len(graph.nodes)} nodes, {len(graph.edges)} edges, {len(graph.executors)} executors, "
            f"{len(TEMPLATES)} templates; {args.topology_format} files loaded in {load:.3f} s "
            f"(CPU {load_cpu:.3f} s; {root})",
            flush=True,
        )

        def new_compiler() -> FlowCompiler:
            return FlowCompiler(graph, Catalog(templates_dir), warehouse=str(root / "lake"))

        rounds, wrong, hops = [], [], 0
        for r in range(max(1, args.rounds)):
            start, cpu = time.perf_counter(), time.process_time()
            seconds, plans = compile_all(new_compiler(), flows)
            total, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(f"round {r + 1}: {total:.3f} s (CPU {cpu:.3f} s)", flush=True)
            wrong += [(i, why) for i, (p, f) in enumerate(zip(plans, flows, strict=True)) if (why := check(p, f))]
            hops = sum(len(p.hops) for p in plans)
            del plans  # a round's plans are checked, then let go: they would slow the next round's GC
            rounds.append((total, cpu, seconds))
        total, cpu, seconds = sorted(rounds, key=lambda x: x[0])[len(rounds) // 2]

        ms = sorted(s * 1000 for s in seconds)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        figures = {
            "nodes": len(graph.nodes),
            "edges": len(graph.edges),
            "flows": len(flows),
            "hops": hops,
            "load_s": round(load, 4),
            "load_cpu_s": round(load_cpu, 4),
            "rounds_s": [round(x[0], 3) for x in rounds],
            "total_s": round(total, 3),
            "cpu_s": round(cpu, 3),
            "flows_per_s": round(len(flows) / total, 1),
            "median_ms": round(statistics.median(ms), 3),
            "p95_ms": round(p95, 3),
            "max_ms": round(ms[-1], 3),
            "ms_per_hop": round(total * 1000 / max(hops, 1), 3),
            "goal_s": args.goal,
            "goal_met": total < args.goal,
            "ok": not wrong,
        }
        per_flow = hops / len(flows)
        print(f"median round: compiled {len(flows):,} flows into {hops:,} hops ({per_flow:.2f} per flow)")
        print(f"  in {total:.3f} s (CPU {cpu:.3f} s)")
        print(f"  {figures['flows_per_s']:,} flows/s, {figures['ms_per_hop']} ms per hop")
        print(f"  per flow: median {figures['median_ms']} ms, p95 {figures['p95_ms']} ms, max {figures['max_ms']} ms")
        print(f"  first flow (templates' parameters read): {seconds[0] * 1000:.1f} ms")
        verdict = "met" if figures["goal_met"] else "NOT met"
        print(f"goal: {len(flows):,} flows in < {args.goal} s: {verdict} ({total:.3f} s)")
        for i, why in wrong[:10]:
            print(f"error: flow {i}: {why}")
        if args.profile:
            print(profile(new_compiler(), flows, args.top))
        print(json.dumps(figures))
        return 1 if wrong else 0
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
