"""Table sinks: formats, modes and partitioning, read back by independent readers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from tests.helpers import json_job, run_dict, write_jsonl

ROWS = [{"id": 1, "day": "2026-11-01"}, {"id": 2, "day": "2026-11-02"}, {"id": 3, "day": "2026-11-02"}]


def job_with(lake: Path, sink: dict[str, Any]) -> dict[str, Any]:
    src = write_jsonl(lake.parent / "in" / "rows.json", ROWS)
    return json_job(src, [], sinks={"out": sink}, source={"schema": "id BIGINT, day STRING"})


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_partition_by_and_append_then_overwrite(spark: Any, lake: Path, fmt: str) -> None:
    job = job_with(lake, {"type": fmt, "path": "out", "partition_by": ["day"]})
    run_dict(spark, job, lake)
    run_dict(spark, job, lake)
    assert {p.name for p in (lake / "out").iterdir() if p.name.startswith("day=")} == {
        "day=2026-11-01",
        "day=2026-11-02",
    }
    assert sorted(_read(fmt, lake / "out")) == [1, 1, 2, 2, 3, 3]
    job["sinks"]["out"]["mode"] = "overwrite"
    run_dict(spark, job, lake)
    assert sorted(_read(fmt, lake / "out")) == [1, 2, 3]


def _read(fmt: str, path: Path) -> list[int]:
    if fmt == "delta":
        return DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()
    return ds.dataset(path, format="parquet", partitioning="hive").to_table().column("id").to_pylist()


def test_json_and_csv_files(spark: Any, lake: Path) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", ROWS)
    sinks = {"j": {"type": "json", "path": "j"}, "c": {"type": "csv", "path": "c", "options": {"header": True}}}
    run_dict(spark, json_job(src, [], sinks=sinks), lake)
    lines = [json.loads(line) for f in sorted((lake / "j").glob("part-*")) for line in f.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == [1, 2, 3]
    files = [f.read_text().splitlines() for f in sorted((lake / "c").glob("part-*.csv"))]
    assert all(lines[0] == "day,id" for lines in files)
    assert sorted(line for lines in files for line in lines[1:]) == ["2026-11-01,1", "2026-11-02,2", "2026-11-02,3"]


def test_partitioning_by_a_missing_column_is_a_config_error_before_any_write(spark: Any, lake: Path) -> None:
    job = job_with(lake, {"type": "delta", "path": "out", "partition_by": ["dya"]})
    job["sinks"]["first"] = {"type": "parquet", "path": "first"}
    with pytest.raises(ConfigError, match="partitions by `dya`") as info:
        run_dict(spark, job, lake)
    assert info.value.key == "job.sinks.out.partition_by"
    assert list(lake.iterdir()) == []


def test_console_sink_prints_rows(spark: Any, lake: Path, capfd: pytest.CaptureFixture[str]) -> None:
    run_dict(spark, job_with(lake, {"type": "console", "rows": 2}), lake)
    out = capfd.readouterr().out
    assert "-- sink `out` (branch `valid`)" in out
    assert "only showing top 2 rows" in out
