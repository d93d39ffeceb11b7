"""A sink in the engine's own places is a config error in both modes: exit 2, the sink's key named,
nothing written (it used to run, fail at publishing and promise a next run that never completes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, write_jsonl


@pytest.mark.parametrize("mode", [pytest.param("validate", id="validate"), pytest.param("run", id="run")])
def test_a_sink_inside_the_engines_metadata_is_refused_before_anything_is_written(
    spark: Any, lake: Path, mode: str
) -> None:
    src = write_jsonl(lake.parent / "in" / "rows.json", [{"id": 1}])
    (lake.parent / "jobs" / "t").mkdir(parents=True)
    (lake.parent / "jobs" / "t" / "state.conf").write_text(
        f'sources.s {{ type = files, format = json, path = "{src}", schema = "id BIGINT" }}\n'
        "sinks.lake { type = delta, path = _engine/state }\n"
    )

    code, summary, said = run_cli(lake.parent / "jobs", "job=t/state", f"warehouse={lake}", f"mode={mode}")

    assert (code, summary["status"]) == (2, "CONFIG_ERROR"), said
    assert "job.sinks.lake.path" in summary["message"] and "state.conf" in summary["message"]
    assert "the engine's metadata" in summary["message"]
    assert list(lake.iterdir()) == []
