"""Flows end to end, through the CLI entry and the test session's Spark: the demo flow, a flow whose
destinations share their first hop, a kill during the second hop and the rerun, and the config
errors a flow can make (a refused template pack, an unreachable destination).

Outputs are read with readers that are not Spark: delta-rs for the lake, pyarrow for the replica."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.commit.harness import driver, run_here

REPO = Path(__file__).resolve().parents[2]


def _ids_in_lake(table: Path) -> list[str]:
    return sorted(map(str, DeltaTable(str(table)).to_pyarrow_table().column("order_id").to_pylist()))


def _ids_in_replica(folder: Path) -> list[str]:
    files = sorted(
        p for p in folder.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in p.parts[-2:])
    )
    return sorted(str(i) for f in files for i in pq.read_table(f).column("order_id").to_pylist())


def _hops(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["jobName"]: h for h in summary["hops"]}


# -- the demo -----------------------------------------------------------------------------------


def test_the_demo_flow_lands_then_replicates_and_a_second_run_moves_nothing(spark: object, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    flow = "flow=demo/orders_to_replica"
    printed: list[str] = []
    code, plan = run_here(REPO / "jobs", wh, "mode=plan", job=flow, printed=printed)
    assert code == 0, plan
    assert [(h["hop"], h["template"], h["executor"]) for h in plan["hops"]] == [
        ("demo_landing_to_lake", "lake/files_to_delta", "local"),
        ("demo_lake_to_replica", "lake/table_copy", "local"),
    ]
    assert plan["hops"][1]["job"]["fan_out"]["template"]["copy"]["target"] == f"{wh}/replica/{{dataset}}"
    assert not wh.exists(), "mode=plan writes nothing"

    code, first = run_here(REPO / "jobs", wh, job=flow)
    assert code == 0, first
    hops = _hops(first)
    assert first["status"] == "SUCCEEDED" and first["flowExecutionId"] == first["run_id"]
    assert [h["executionStatus"] for h in first["hops"]] == ["SUCCEEDED", "SUCCEEDED"]
    lake = _ids_in_lake(wh / "lake" / "orders")
    assert hops["demo_landing_to_lake"]["processedCount"] == 48 and len(lake) == 46  # 2 rejected
    assert hops["demo_landing_to_lake"]["errorCount"] == 2
    assert _ids_in_replica(wh / "replica" / "orders") == lake
    assert hops["demo_lake_to_replica"]["processedCount"] >= 1

    code, second = run_here(REPO / "jobs", wh, job=flow)
    assert code == 0, second
    assert [(h["executionStatus"], h["processedCount"]) for h in second["hops"]] == [("SUCCEEDED", 0)] * 2
    assert _ids_in_replica(wh / "replica" / "orders") == lake == _ids_in_lake(wh / "lake" / "orders")

    code, status = run_here(REPO / "jobs", wh, "mode=status", job=flow)
    assert code == 0, status
    executions = status["executions"]
    assert [e["flowExecutionId"] for e in executions] == [second["run_id"], first["run_id"]]
    assert all(e["executionStatus"] == "SUCCEEDED" and len(e["jobStatuses"]) == 2 for e in executions)
    assert executions[1]["jobStatuses"][0]["highWatermark"]

    code, valid = run_here(REPO / "jobs", wh, "mode=validate", job=flow)
    assert code == 0 and valid["status"] == "VALID", valid


# -- a graph of our own -------------------------------------------------------------------------


def _graph(tmp_path: Path, *, principals: str = '["*"]', extra_nodes: str = "") -> tuple[Path, Path, Path]:
    """A jobs dir (the repo's `lake` pack, with ``principals``), landing data and a topology:
    landing -> lake -> replica_a and lake -> replica_b."""
    jobs = tmp_path / "jobs"
    pack = jobs / "templates" / "lake"
    shutil.copytree(REPO / "jobs" / "templates" / "lake", pack)
    (pack / "pack.conf").write_text(f"owners = [platform]\nprincipals = {principals}\n")
    landing = tmp_path / "landing"
    (landing / "schemas").mkdir(parents=True)
    shutil.copy(REPO / "jobs" / "demo" / "data" / "orders.json", landing / "orders.json")
    shutil.copy(REPO / "jobs" / "demo" / "schemas" / "orders.avsc", landing / "schemas" / "orders.avsc")
    topology = tmp_path / "topology"
    topology.mkdir()
    (topology / "graph.conf").write_text(
        f"""
nodes {{
  landing {{ properties {{ path = "{landing}", schemas = "{landing}/schemas" }} }}
  lake {{ kind = lake, properties {{ path = lake }} }}
  replica_a {{ properties {{ path = ${{params.warehouse}}"/replica_a" }} }}
  replica_b {{ properties {{ path = "{tmp_path}/replica_b" }} }}
  {extra_nodes}
}}
edges {{
  landing_to_lake {{ from = landing, to = lake, templates = [lake/files_to_delta], executors = [local] }}
  lake_to_a {{ from = lake, to = replica_a, templates = [lake/table_copy], executors = [local] }}
  lake_to_b {{ from = lake, to = replica_b, templates = [lake/table_copy], executors = [local], cost = 2 }}
}}
"""
    )
    return jobs, landing, topology


def _flow(jobs: Path, body: str, name: str = "t/orders") -> None:
    file = jobs / "flows" / f"{name}.conf"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(body)


def test_two_destinations_share_their_first_hop_and_it_runs_once(spark: object, tmp_path: Path) -> None:
    jobs, _, topology = _graph(tmp_path)
    _flow(jobs, "owner = alice\nsource = landing\ndestinations = [replica_a, replica_b]\ndatasets = [orders]\n")
    wh = tmp_path / "wh"
    code, summary = run_here(jobs, wh, f"topology_dir={topology}", job="flow=t/orders")
    assert code == 0, summary
    assert [h["jobName"] for h in summary["hops"]] == ["landing_to_lake", "lake_to_a", "lake_to_b"]
    assert all(h["executionStatus"] == "SUCCEEDED" for h in summary["hops"])
    lake = _ids_in_lake(wh / "lake" / "orders")
    assert len(lake) == 46
    assert _ids_in_replica(wh / "replica_a" / "orders") == lake
    assert _ids_in_replica(tmp_path / "replica_b" / "orders") == lake
    # the lake was written by one run of one hop: one commit after the table's creation
    assert len(DeltaTable(str(wh / "lake" / "orders")).history()) == 1

    code, plan = run_here(jobs, wh, f"topology_dir={topology}", "mode=plan", job="flow=t/orders")
    assert code == 0, plan
    assert plan["routes"] == {
        "replica_a": ["landing_to_lake", "lake_to_a"],
        "replica_b": ["landing_to_lake", "lake_to_b"],
    }
    assert [h["after"] for h in plan["hops"]] == [[], ["landing_to_lake"], ["landing_to_lake"]]


@pytest.mark.crash
def test_a_kill_during_the_second_hop_then_a_rerun_finishes_it_and_reads_nothing_new(
    spark: object, tmp_path: Path
) -> None:
    jobs, _, topology = _graph(tmp_path)
    _flow(jobs, "owner = alice\nsource = landing\ndestinations = [replica_a]\ndatasets = [orders]\n")
    wh = tmp_path / "wh"
    killed = driver(
        jobs, wh, kill_at="after_step:1@lake_to_a.orders", extra=[f"topology_dir={topology}"], job="flow=t/orders"
    ).communicate_result(300)
    assert killed.returncode == -9, killed.stderr[-3000:]
    lake = _ids_in_lake(wh / "lake" / "orders")
    assert len(lake) == 46  # hop 1 was published before hop 2 started

    code, rerun = run_here(jobs, wh, f"topology_dir={topology}", job="flow=t/orders")
    assert code == 0, rerun
    hops = _hops(rerun)
    assert hops["landing_to_lake"]["processedCount"] == 0  # a finished hop reads nothing new
    assert hops["lake_to_a"]["executionStatus"] == "SUCCEEDED"
    assert _ids_in_replica(wh / "replica_a" / "orders") == lake  # each row once: recovery, not a second copy
    assert _ids_in_lake(wh / "lake" / "orders") == lake

    code, status = run_here(jobs, wh, f"topology_dir={topology}", "mode=status", job="flow=t/orders")
    assert code == 0, status
    latest, killed_one = status["executions"]
    assert latest["flowExecutionId"] == rerun["run_id"] and latest["executionStatus"] == "SUCCEEDED"
    assert killed_one["executionStatus"] == "FAILED" and "the process died" in killed_one["message"]


# -- config errors ------------------------------------------------------------------------------


def test_a_template_from_a_pack_the_owner_may_not_use_is_refused(tmp_path: Path) -> None:
    jobs, _, topology = _graph(tmp_path, principals='[alice, "group:analysts"]')
    _flow(jobs, "owner = mallory\nsource = landing\ndestinations = [replica_a]\ndatasets = [orders]\n")
    wh = tmp_path / "wh"
    code, summary = run_here(jobs, wh, f"topology_dir={topology}", job="flow=t/orders")
    assert code == 2 and summary["status"] == "CONFIG_ERROR", summary
    assert "principal `mallory` may not use template pack `lake`" in summary["message"]
    assert "alice" in summary["message"] and "group:analysts" in summary["message"]
    assert not wh.exists(), "nothing is written for a refused flow"


def test_an_unreachable_destination_names_what_was_reached_and_the_edge_needed(tmp_path: Path) -> None:
    jobs, _, topology = _graph(tmp_path, extra_nodes="island { kind = folder }")
    _flow(jobs, "owner = alice\nsource = landing\ndestinations = [replica_a, island]\ndatasets = [orders]\n")
    code, summary = run_here(jobs, tmp_path / "wh", f"topology_dir={topology}", job="flow=t/orders")
    assert code == 2, summary
    message = summary["message"]
    assert "destination `island` cannot be reached from `landing`" in message
    assert "reaches lake, landing, replica_a, replica_b" in message
    assert "no edge leads into `island`" in message and "an edge from one of" in message
    assert "flow.destinations[1]" in message


def test_a_missing_required_parameter_is_named_with_its_key(tmp_path: Path) -> None:
    jobs, _, topology = _graph(tmp_path)
    _flow(jobs, "owner = alice\nsource = landing\ndestinations = [replica_a]\n")  # no datasets
    code, summary = run_here(jobs, tmp_path / "wh", f"topology_dir={topology}", job="flow=t/orders")
    assert code == 2, summary
    assert "needs parameter `datasets`" in summary["message"] and "key `flow.datasets`" in summary["message"]


def test_neither_job_nor_flow_is_a_usage_error(tmp_path: Path) -> None:
    from engine.cli.app import run_task
    from engine.config import run_app

    printed: list[str] = []
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_app([f"warehouse={tmp_path}"], run_task)
    printed = out.getvalue().strip().splitlines()
    assert code == 2
    assert "give one of `job=<path under jobs/>` and `flow=<group>/<name>`" in json.loads(printed[-1])["message"]


def test_a_topology_file_may_be_one_object_in_braces(tmp_path: Path) -> None:
    """JSON is HOCON: a root object in braces reads like keys at the top, ``${params...}`` too."""
    from engine.flow.topology import load_topology

    (tmp_path / "g.conf").write_text('{"nodes": {"a": {"properties": {"path": ${params.warehouse}"/a"}}, "b": {}}}\n')
    graph = load_topology(tmp_path, params={"warehouse": "/wh"})
    assert graph.nodes["a"].properties == {"path": "/wh/a"} and set(graph.nodes) == {"a", "b"}


def test_submitted_hops_are_refused_with_a_warehouse_on_an_object_store(tmp_path: Path) -> None:
    from engine.cli.flows import _check_submittable
    from engine.config.templates import read_config
    from engine.errors import ConfigError
    from engine.flow import compile_flow

    file = REPO / "jobs" / "flows" / "demo" / "orders_to_replica.conf"
    plan = compile_flow(read_config(file), choice="demo/orders_to_replica", file=str(file), warehouse=str(tmp_path))
    _check_submittable(plan, [h.name for h in plan.hops], "s3a://bucket/wh")  # every hop here: fine
    with pytest.raises(ConfigError, match="one driver at a time") as caught:
        _check_submittable(plan, [plan.hops[0].name], "s3a://bucket/wh")
    assert caught.value.key == "warehouse" and "demo_lake_to_replica" in str(caught.value)
