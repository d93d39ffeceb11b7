"""The sessions a run uses: FAIR scheduler settings from a job's ``pools`` (no JVM: the allocation
file Spark reads), and the run's settings carried into each DAG's session."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from engine.runtime.session import SNAPSHOT_PARTITIONS, child_session, fair_pools, run_session
from engine.spec.model import PoolConf
from tests.helpers import json_job, run_dict, write_jsonl


def test_pools_become_an_allocation_file_spark_reads_at_start() -> None:
    conf = fair_pools({"urgent": PoolConf(weight=4, min_share=1), "bulk": PoolConf()})
    assert conf["spark.scheduler.mode"] == "FAIR"
    root = ET.parse(conf["spark.scheduler.allocation.file"]).getroot()
    pools = {p.get("name"): {c.tag: c.text for c in p} for p in root.findall("pool")}
    assert pools == {
        "bulk": {"schedulingMode": "FIFO", "weight": "1", "minShare": "0"},
        "urgent": {"schedulingMode": "FIFO", "weight": "4", "minShare": "1"},
    }
    Path(conf["spark.scheduler.allocation.file"]).unlink()


def test_without_pools_it_is_fair_scheduling_with_spark_defaults() -> None:
    assert fair_pools({}) == {"spark.scheduler.mode": "FAIR"}


def test_a_runs_spark_settings_reach_the_sessions_its_dags_run_in(spark: Any, lake: Path) -> None:
    """A job's ``spark.conf`` is set on the run's session; each DAG runs in a session of its own
    that must start from those settings (``newSession()`` would drop them). With ANSI casts off,
    a text that is not a number casts to null; with Spark's default (on) the DAG fails."""
    rows = write_jsonl(lake / "in" / "a.json", [{"id": 1, "code": "7"}, {"id": 2, "code": "seven"}])
    job = json_job(rows, [{"type": "derive", "columns": {"n": "cast(code as int)"}}])
    run = run_session(spark, {"spark.sql.ansi.enabled": "false"})
    result, _ = run_dict(run, job, lake)
    assert result.status == "SUCCEEDED", result.summary()
    table = DeltaTable(str(lake / "out")).to_pyarrow_table()
    assert sorted(zip(table.column("id").to_pylist(), table.column("n").to_pylist(), strict=True)) == [
        (1, 7),
        (2, None),
    ]


def test_a_dags_session_keeps_its_own_settings_from_then_on(spark: Any) -> None:
    run = run_session(spark, {"spark.sql.shuffle.partitions": "3"})
    child = child_session(run)
    child.conf.set("spark.sql.shuffle.partitions", "5")
    assert run.conf.get("spark.sql.shuffle.partitions") == "3"
    assert child_session(run).conf.get("spark.sql.shuffle.partitions") == "3"


def test_delta_settings_of_a_job_are_applied_and_snapshots_sized_to_the_cores(spark: Any) -> None:
    """Delta registers its settings lazily: until it has, Spark calls them unmodifiable and the
    run's session used to drop them. Unset, Delta's snapshot tasks follow the cores (2 here)."""
    assert run_session(spark, {SNAPSHOT_PARTITIONS: "7"}).conf.get(SNAPSHOT_PARTITIONS) == "7"
    assert (
        run_session(spark, {"spark.databricks.delta.schema.autoMerge.enabled": "true"}).conf.get(
            "spark.databricks.delta.schema.autoMerge.enabled"
        )
        == "true"
    )
    assert run_session(spark).conf.get(SNAPSHOT_PARTITIONS) == str(min(50, spark.sparkContext.defaultParallelism))


def test_a_column_function_costs_no_round_trips_for_its_python_call_site(spark: Any, monkeypatch: Any) -> None:
    """PySpark 4 records the Python call site of each column function (for the query context of
    a runtime error) unless the session turns it off, as the engine's do: the call sites would
    name the engine's code, and the chain, the forks and the commits build hundreds of columns a
    run. Recorded, ``upper(col("x"))`` is 16 messages to the JVM; without, 6."""
    from pyspark.sql import functions as F

    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    send, me = client.send_command, threading.get_ident()

    def counted(command: str, *a: Any, **k: Any) -> Any:
        if threading.get_ident() == me and not command.startswith("m\n"):  # not py4j's collector's
            sent.append(command)
        return send(command, *a, **k)

    monkeypatch.setattr(client, "send_command", counted)

    F.upper(F.col("x"))

    assert len(sent) <= 8, sent
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
