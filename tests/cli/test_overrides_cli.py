"""Documented keys the job file leaves out, overridden plainly through the command line in
``mode=validate`` and ``mode=run`` (in this process, the test session's Spark); outputs read with
delta-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import delta_ids, run_cli, write_jsonl


def test_source_sink_and_converter_defaults_are_overridden_in_validate_and_run(spark: Any, lake: Path) -> None:
    land, jobs = lake.parent / "land", lake.parent / "jobs"
    write_jsonl(land / "a.json", [{"id": i} for i in range(3)])
    (jobs / "t").mkdir(parents=True)
    (jobs / "t" / "flights.conf").write_text(
        f'sources.flights {{ type = files, format = json, path = "{land}/*.json", schema = "id BIGINT" }}\n'
        "converters = [{ type = dedupe, keys = [id] }]\n"
        "sinks.lake { type = delta, path = flights }\n"
    )
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}")
    assert (code, delta_ids(lake / "flights")) == (0, [0, 1, 2]), said
    write_jsonl(land / "b.json", [{"id": 3}, {"id": 4}])
    overrides = [
        "job.sources.flights.lookback=0",
        "job.sinks.lake.mode=overwrite",
        "job.converters.0.on_duplicate=reject",
    ]

    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", "mode=validate", *overrides)
    assert (code, summary["status"]) == (0, "VALID"), said
    code, summary, said = run_cli(jobs, "job=t/flights", f"warehouse={lake}", *overrides)
    assert (code, summary["status"]) == (0, "SUCCEEDED"), said
    assert delta_ids(lake / "flights") == [3, 4]  # overwritten with what this run read


def test_an_undocumented_key_is_refused_naming_it(spark: Any, lake: Path) -> None:
    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True)
    (jobs / "t" / "flights.conf").write_text(
        'sources.flights { type = files, format = json, path = "in/*.json" }\nsinks.lake { type = delta, path = f }\n'
    )
    for mode in ("validate", "run"):
        code, _, said = run_cli(
            jobs, "job=t/flights", f"warehouse={lake}", f"mode={mode}", "job.sources.flights.lookbak=0"
        )
        assert code == 2, said  # composition fails before any run (main() prints the CONFIG_ERROR line)
        assert "unknown key `job.sources.flights.lookbak`: did you mean `job.sources.flights.lookback`?" in said
    assert list(lake.iterdir()) == []
