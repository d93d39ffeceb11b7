"""The JobManager: several JobDags in one SparkSession, failure isolation, validate mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from engine.runtime import JobManager
from engine.state.status import Status
from tests.helpers import compile_dict, run_dict, write_jsonl


def dag(src: Path, out: str, derive: str = "id * 2") -> dict[str, Any]:
    return {
        "sources": {"s": {"type": "files", "format": "json", "path": str(src), "schema": "id BIGINT"}},
        "converters": [{"type": "derive", "columns": {"twice": derive}}],
        "sinks": {"out": {"type": "delta", "path": out}},
    }


def test_dags_run_in_parallel_and_one_failure_does_not_stop_the_others(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": i} for i in range(10)])
    job = {
        "name": "shop",
        "parallelism": 3,
        "dags": {
            "a": dag(src, "a"),
            "boom": dag(src, "boom", derive="raise_error('injected failure')"),
            "c": dag(src, "c"),
        },
    }
    result, store = run_dict(spark, job, lake, name="shop")
    by_name = {d.name: d for d in result.dags}
    assert (by_name["a"].status, by_name["c"].status, by_name["boom"].status) == ("SUCCEEDED", "SUCCEEDED", "FAILED")
    assert "injected failure" in by_name["boom"].message
    assert result.status == "PARTIAL"  # a and c committed, boom did not
    assert result.summary()["failed_dags"] == ["boom"]
    for name in ("a", "c"):
        assert sorted(DeltaTable(str(lake / name)).to_pyarrow_table().column("twice").to_pylist()) == list(
            range(0, 20, 2)
        )
    assert (
        not (lake / "boom" / "_delta_log").exists() or DeltaTable(str(lake / "boom")).to_pyarrow_table().num_rows == 0
    )
    statuses = {r.dag: r.status for r in store.history("shop")}
    assert statuses == {"a": Status.SUCCEEDED, "boom": Status.FAILED, "c": Status.SUCCEEDED}


def test_a_config_mistake_in_any_dag_stops_the_job_before_any_write(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    job = {"dags": {"a": dag(src, "a"), "b": dag(src, "b", derive="nope + 1")}}
    with pytest.raises(ConfigError) as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.dags.b.converters[0]"
    assert list(lake.iterdir()) == []


def test_missing_input_path_is_a_config_error(spark: Any, lake: Path) -> None:
    job = {"dags": {"a": dag(lake.parent / "nowhere" / "*.json", "a")}}
    with pytest.raises(ConfigError, match="input path does not exist") as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.dags.a.sources.s.path"


@pytest.mark.parametrize(
    ("schema", "derive", "needle"),
    [
        pytest.param("id BIGINT", "nope + 1", "nope", id="analysed-with-schema"),
        pytest.param(None, "id +* 1", "does not parse", id="parsed-without-schema"),
    ],
)
def test_validate_checks_without_running_any_spark_job(
    spark: Any, lake: Path, schema: str | None, derive: str, needle: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    raw = dag(src, "a", derive=derive)
    if schema is None:
        del raw["sources"]["s"]["schema"]
    spec = compile_dict(raw, lake)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("validate", "validate")
    with pytest.raises(ConfigError, match=needle):
        JobManager(spark).validate(spec, "r")
    raw["converters"][0]["columns"]["twice"] = "id * 2"
    JobManager(spark).validate(compile_dict(raw, lake), "r")
    assert tracker.getJobIdsForGroup("validate") == []
    assert list(lake.iterdir()) == []
