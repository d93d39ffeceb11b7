"""The JobManager's graph: dependencies, priorities, pools, fan-out over discovered datasets, and
a stop that cancels running DAGs, publishes nothing half-done and leaves a rerun to finish."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from engine.runtime import JobManager
from engine.runtime.discovery import discover
from engine.runtime.progress import Board
from engine.runtime.stop import Stop
from engine.spec import compile_job
from engine.state import InMemoryRunStore
from engine.state.status import Status
from engine.state.store import InMemoryMetadataStore
from tests.helpers import NAP, NAP_SQL, compile_dict, delta_ids, run_dict, write_jsonl


def files_dag(src: Path | str, out: str, **over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "sources": {"s": {"type": "files", "format": "json", "path": str(src), "schema": "id BIGINT"}},
        "sinks": {"out": {"type": "delta", "path": out}},
    }
    raw.update(over)
    return raw


def test_a_dependent_dag_reads_what_its_upstream_published_in_the_same_run(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(6)])
    job = {
        "dags": {
            "refine": {
                "after": ["land"],  # its input does not exist before `land` runs: planned when it starts
                "sources": {"s": {"type": "delta", "path": "landed"}},
                "converters": [{"type": "check", "expr": "id % 2 = 0", "reason": "odd"}],
                "sinks": {"out": {"type": "delta", "path": "refined"}},
            },
            "land": files_dag(src, "landed"),
        }
    }
    result, store = run_dict(spark, job, lake)
    assert result.status == "SUCCEEDED", result.summary()
    assert sorted(delta_ids(lake / "refined")) == [0, 2, 4]
    history = sorted(store.history("t"), key=lambda r: r.start_time)
    assert [r.dag for r in history] == ["land", "refine"]


def test_a_failed_upstream_skips_its_dependents_and_says_why(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    boom = files_dag(src, "landed", converters=[{"type": "derive", "columns": {"x": "raise_error('broken feed')"}}])
    job = {
        "dags": {
            "land": boom,
            "refine": {
                "after": ["land"],
                "sources": {"s": {"type": "delta", "path": "landed"}},
                "sinks": {"out": {"type": "delta", "path": "refined"}},
            },
            "report": files_dag(src, "other", after=["refine"]),
            "independent": files_dag(src, "independent"),
        }
    }
    metadata = InMemoryMetadataStore()
    result = JobManager(spark, metadata).run(compile_dict(job, lake), "run-1", store := InMemoryRunStore())
    by_name = {d.name: d for d in result.dags}
    assert by_name["land"].status == "FAILED" and "broken feed" in by_name["land"].message
    assert by_name["refine"].status == "SKIPPED" and "upstream land" in by_name["refine"].message
    assert by_name["report"].status == "SKIPPED" and "upstream refine" in by_name["report"].message
    assert by_name["independent"].status == "SUCCEEDED"
    assert sorted(result.summary()["failed_dags"]) == ["land", "refine", "report"]
    assert not (lake / "refined").exists() and not (lake / "other").exists()
    assert {r.dag: r.status for r in store.history("t")}["refine"] == Status.SKIPPED
    rows = [r for r in metadata.job_status("t") if r.dag == "refine"]
    assert [r.status for r in rows] == [Status.SKIPPED] and "upstream land" in rows[0].message


def test_run_rows_that_cannot_be_written_fail_the_run_and_say_the_data_were_published(spark: Any, lake: Path) -> None:
    from engine.errors import JobFailedError
    from engine.state.delta_runs import DeltaRunStore

    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(4)])
    runs_path = str(lake / "_engine" / "runs")
    DeltaRunStore(spark, runs_path).ensure()  # a newer engine's runs table: every append is refused
    spark.sql(f"ALTER TABLE delta.`{runs_path}` SET TBLPROPERTIES ('engine.schema_version' = '9')")
    metadata = InMemoryMetadataStore()
    with pytest.raises(JobFailedError, match="flow row says SUCCEEDED, but its run rows were not all written"):
        JobManager(spark, metadata).run(
            compile_dict({"dags": {"land": files_dag(src, "landed")}}, lake), "run-1", DeltaRunStore(spark, runs_path)
        )
    assert sorted(delta_ids(lake / "landed")) == [0, 1, 2, 3]
    assert [r.status.value for r in metadata.flow_status("t")] == ["SUCCEEDED"]


def test_one_at_a_time_higher_priority_then_costlier_dags_start_first(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(3)])
    job = {
        "parallelism": 1,
        "dags": {
            "low": files_dag(src, "low"),
            "high": files_dag(src, "high", priority=10),
            "mid": files_dag(src, "mid", priority=5),
        },
    }
    manager = JobManager(spark)
    planned = manager.plan(compile_dict(job, lake), "run-1")
    board, order = Board(), []
    board.listeners.append(lambda p: order.append(p.name) if p.phase == "running" and p.name not in order else None)
    result = manager.execute(planned, InMemoryRunStore(), board=board)
    assert result.status == "SUCCEEDED"
    assert order == ["high", "mid", "low"]


def test_each_dag_runs_its_spark_jobs_in_its_own_fair_pool(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(3)])
    job = {"dags": {"a": files_dag(src, "a", pool="heavy"), "b": files_dag(src, "b")}}
    run_id = f"pools-{uuid.uuid4().hex[:8]}"  # its own job groups: older ones' stages may be evicted
    result = JobManager(spark).run(compile_dict(job, lake), run_id, InMemoryRunStore())
    assert result.status == "SUCCEEDED"
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty(10000)
    store = sc._jsc.sc().statusStore()
    for dag, pool in (("a", "heavy"), ("b", "b")):
        job_ids = sc.statusTracker().getJobIdsForGroup(f"{run_id}:{dag}:wu0")
        assert job_ids, f"no Spark job ran for dag {dag}"
        stage_ids = [s.apply(i) for s in (store.job(j).stageIds() for j in job_ids) for i in range(s.length())]
        stages = [s for s in (kept_stage(store, i) for i in stage_ids) if s is not None]
        ran = [s for s in stages if s.status().toString() != "SKIPPED"]  # skipped ones never reach a pool
        assert ran and {s.schedulingPool() for s in ran} == {pool}


def kept_stage(store: Any, stage_id: int) -> Any:
    """The stage's last attempt, or None if the status store no longer holds it: past
    ``spark.ui.retainedStages`` it evicts stages by completion time, and a skipped stage has none,
    so late in a long session a job's skipped stages can be gone the moment it ends."""
    try:
        return store.lastStageAttempt(stage_id)
    except Exception:  # py4j's NoSuchElementException
        return None


def slow_job(src: Path) -> dict[str, Any]:
    # every record sleeps NAP ms in the JVM (300 for the run to stop: reading takes seconds, and a cancel
    # interrupts it; 0 for the reruns, which run the same job, so the stored plan and chain stay the same)
    sleepy = [{"type": "derive", "columns": {"nap": NAP_SQL}}]
    return {
        "parallelism": 2,
        "dags": {name: files_dag(src, name, converters=sleepy) for name in ("one", "two", "three")},
    }


def test_a_stop_cancels_running_dags_publishes_nothing_and_a_rerun_finishes(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(20)])
    metadata, store = InMemoryMetadataStore(), InMemoryRunStore()
    manager = JobManager(spark, metadata)
    planned = manager.plan(compile_dict(slow_job(src), lake), "run-1")
    board, stop = Board(), Stop()
    out: dict[str, Any] = {}
    system = spark._jvm.java.lang.System
    system.setProperty(NAP, "300")
    try:
        runner = threading.Thread(target=lambda: out.update(r=manager.execute(planned, store, stop=stop, board=board)))
        runner.start()
        deadline = time.monotonic() + 120
        while sum(1 for p in board.snapshot() if p.phase == "running") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.request("received SIGTERM", 15)
        runner.join(timeout=300)
    finally:
        system.clearProperty(NAP)
    result = out["r"]
    assert result.status == "CANCELLED" and result.summary()["stopped_by"] == "received SIGTERM"
    statuses = {d.name: d.status for d in result.dags}
    assert statuses == {"one": "CANCELLED", "two": "CANCELLED", "three": "CANCELLED"}
    for name in statuses:
        assert not (lake / name / "_delta_log").exists(), f"{name} published something"
    flow = metadata.flow_status("t")[0]
    assert flow.status.value == "CANCELLED"
    assert {r.status for r in metadata.job_status("t")} == {Status.CANCELLED}

    rerun = JobManager(spark, metadata).run(compile_dict(slow_job(src), lake), "run-2", store)
    assert rerun.status == "SUCCEEDED"
    clean = lake.parent / "clean"
    clean.mkdir()
    assert JobManager(spark).run(compile_dict(slow_job(src), clean), "run-x", InMemoryRunStore()).status == "SUCCEEDED"
    for name in statuses:
        assert sorted(delta_ids(lake / name)) == sorted(delta_ids(clean / name)) == list(range(20))


def test_a_fan_out_over_discovered_directories_gives_each_dataset_its_own_state(spark: Any, lake: Path) -> None:
    landing = lake.parent / "landing"
    write_jsonl(landing / "clicks" / "1.json", [{"id": 1}, {"id": 2}])
    write_jsonl(landing / "views" / "1.json", [{"id": 10}])
    (landing / "_tmp").mkdir()  # hidden: not a dataset
    raw = {
        "fan_out": {
            "discover": {"type": "glob", "path": f"{landing}/*"},
            "template": files_dag("{path}/*.json", "lake/{dataset}"),
        }
    }
    metadata = InMemoryMetadataStore()

    def run(n: int) -> Any:
        spec = compile_job(raw, name="t", file=None, warehouse=str(lake))
        assert spec.discover is not None
        found = discover(spark, spec.discover, file=None)
        spec = compile_job(raw, name="t", file=None, warehouse=str(lake), found=found)
        return JobManager(spark, metadata).run(spec, f"run-{n}", InMemoryRunStore())

    first = run(1)
    assert [d.name for d in first.dags] == ["clicks", "views"] and first.status == "SUCCEEDED"
    assert sorted(delta_ids(lake / "lake" / "clicks")) == [1, 2]
    write_jsonl(landing / "clicks" / "2.json", [{"id": 3}])
    write_jsonl(landing / "orders" / "1.json", [{"id": 7}])  # a new directory: a new DAG
    second = run(2)
    reads = {d.name: d.records_read for d in second.dags}
    assert reads == {"clicks": 1, "orders": 1, "views": 0}  # each DAG read only what was new to it
    assert sorted(delta_ids(lake / "lake" / "clicks")) == [1, 2, 3]
    assert DeltaTable(str(lake / "lake" / "orders")).to_pyarrow_table().num_rows == 1


def test_a_fan_out_over_the_tables_of_a_database_schema(spark: Any, lake: Path, postgres: Any) -> None:
    postgres.psql("DROP SCHEMA IF EXISTS fan CASCADE; CREATE SCHEMA fan")
    for table, n in (("alpha", 3), ("beta", 5)):
        postgres.psql(f"CREATE TABLE fan.{table} AS SELECT g AS id FROM generate_series(1, {n}) g")
    postgres.psql("CREATE VIEW fan.gamma AS SELECT 1 AS id")
    login = {"url": postgres.jdbc_url, "user": postgres.user, "password": postgres.password}
    template = {
        "sources": {"db": {"type": "jdbc", **login, "table": "{table}"}},
        "sinks": {"out": {"type": "delta", "path": "mirror/{dataset}"}},
    }
    raw = {
        "fan_out": {
            "discover": {"type": "jdbc_tables", **login, "schema": "fan"},
            "template": template,
        }
    }
    spec = compile_job(raw, name="t", file=None, warehouse=str(lake))
    assert spec.discover is not None
    found = discover(spark, spec.discover, file=None)
    assert [(f.dataset, f.values["table"]) for f in found] == [("alpha", "fan.alpha"), ("beta", "fan.beta")]
    with_views = spec.discover.model_copy(update={"views": True})
    assert [f.dataset for f in discover(spark, with_views, file=None)] == ["alpha", "beta", "gamma"]
    spec = compile_job(raw, name="t", file=None, warehouse=str(lake), found=found)
    result = JobManager(spark).run(spec, "run-1", InMemoryRunStore())
    assert result.status == "SUCCEEDED"
    assert sorted(delta_ids(lake / "mirror" / "alpha")) == [1, 2, 3]
    assert sorted(delta_ids(lake / "mirror" / "beta")) == [1, 2, 3, 4, 5]


def test_discovery_of_an_unreachable_database_is_one_clear_error(spark: Any) -> None:
    from engine.errors import JobFailedError
    from engine.spec.model import JdbcTablesDiscoverConf

    conf = JdbcTablesDiscoverConf.model_validate(
        {"type": "jdbc_tables", "url": "jdbc:postgresql://127.0.0.1:1/none", "schema": "s"}
    )
    with pytest.raises(JobFailedError, match=r"cannot list the tables of schema `s`: .*Connection"):
        discover(spark, conf, file=None)


def dependent_job(src: Path, source: dict[str, Any]) -> dict[str, Any]:
    """``land`` writes the Delta table ``out/a``; ``dep`` runs after it reading ``source``."""
    base = {"type": "files", "format": "parquet", "schema": "id BIGINT"}
    dep = {"after": ["land"], "sources": {"f": {**base, **source}}, "sinks": {"o": {"type": "delta", "path": "dep"}}}
    return {"dags": {"land": files_dag(src, "out/a"), "dep": dep}}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("{lake}/out/*/", id="a-glob-over-the-upstreams-directories"),
        pytest.param("{lake}/out", id="the-directory-holding-the-upstreams-output"),
    ],
)
def test_a_dependent_may_read_above_what_its_upstream_writes_on_a_fresh_warehouse(
    spark: Any, lake: Path, path: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    spec = compile_dict(dependent_job(src, {"path": path.format(lake=lake)}), lake)
    JobManager(spark).validate(spec, "r")  # used to say: input path does not exist
    JobManager(spark).plan(spec, "r")  # run checks a dependent the same way
    assert not (lake / "out").exists()


@pytest.mark.parametrize(
    ("source", "key", "needle"),
    [
        pytest.param(
            {"path": ["{lake}/out/a", "{lake}/nowhere/*.json"]},
            "job.dags.dep.sources.f.path",
            "input path does not exist: {lake}/nowhere",
            id="a-second-path-nobody-writes",
        ),
        pytest.param(
            {"path": "{lake}/out/a", "incremental": "partitions"},
            "job.dags.dep.sources.f",
            "needs a `partitions",
            id="partitions-without-their-block",
        ),
        pytest.param(
            {"path": "{lake}/out/a", "incremental": "none", "from": "2026-01-01"},
            "job.dags.dep.sources.f.from",
            "a backfill range",
            id="a-backfill-of-a-non-incremental-source",
        ),
    ],
)
@pytest.mark.parametrize("mode", [pytest.param("validate", id="validate"), pytest.param("plan", id="run")])
def test_a_dependent_still_checks_what_its_upstreams_do_not_write(
    spark: Any, lake: Path, source: dict[str, Any], key: str, needle: str, mode: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    at = {
        k: [p.format(lake=lake) for p in v] if isinstance(v, list) else v.format(lake=lake) for k, v in source.items()
    }
    spec = compile_dict(dependent_job(src, at), lake)
    with pytest.raises(ConfigError, match=re.escape(needle.format(lake=lake))) as info:
        getattr(JobManager(spark), mode)(spec, "r")
    assert info.value.key == key
    assert not (lake / "out").exists()
