"""What a re-read range does to each sink, as ``mode=checkpoint`` says it (no Spark), and a rewind
then a run through the CLI (the session's Spark)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from engine.cli.rewind_effects import DUPLICATES, REPLACED, SAFE, SHOWN, advice, sink_replays, summary
from engine.spec.model import DagSpec
from tests.commit.harness import JOB, Inputs, run_here, sink_ids, watermarks, write_job
from tests.helpers import compile_dict

SINKS = {
    "lake": {"type": "delta", "path": "lake"},
    "extract": {"type": "parquet", "path": "extract", "partition_by": ["day"]},
    "bad": {"type": "json", "path": "bad", "from": "error"},
    "latest": {"type": "csv", "path": "latest", "mode": "overwrite"},
    "merged": {"type": "delta", "path": "merged", "mode": "merge", "keys": ["id", "day"]},
    "peek": {"type": "console"},
}


def dag_of(lake: Path, *, errors: bool = True) -> DagSpec:
    raw = {
        "sources": {
            "in": {"type": "files", "format": "json", "path": str(lake / "in"), "schema": "id INT, day STRING"}
        },
        "sinks": SINKS,
        "errors": {"enabled": errors},
    }
    (dag,) = compile_dict(raw, lake).dags
    assert isinstance(dag, DagSpec)
    return dag


@pytest.mark.parametrize(
    ("name", "effect", "what"),
    [
        pytest.param("sink `lake`", DUPLICATES, "delta, mode append", id="delta-append"),
        pytest.param("sink `extract`", DUPLICATES, "parquet files, mode append", id="parquet-extract"),
        pytest.param("sink `bad`", DUPLICATES, "json files, mode append", id="error-branch-extract"),
        pytest.param("sink `latest`", REPLACED, "csv files, mode overwrite", id="overwrite"),
        pytest.param("sink `merged`", SAFE, "delta, mode merge on id, day", id="delta-merge-on-keys"),
        pytest.param("sink `peek`", SHOWN, "console", id="console"),
    ],
)
def test_each_sink_says_what_a_replay_does_to_it(tmp_path: Path, name: str, effect: str, what: str) -> None:
    found = {r.name: r for r in sink_replays(dag_of(tmp_path))}
    assert (found[name].effect, found[name].what) == (effect, what)


def test_the_error_table_is_safe_and_listed_last(tmp_path: Path) -> None:
    replays = sink_replays(dag_of(tmp_path))
    assert [r.name for r in replays][-1] == "error table"
    assert replays[-1].effect == SAFE
    assert str(tmp_path / "_errors" / "t") in replays[-1].what
    assert "error table" not in [r.name for r in sink_replays(dag_of(tmp_path, errors=False))]


def test_the_summary_and_the_advice_name_the_sinks_that_will_hold_duplicates(tmp_path: Path) -> None:
    replays = sink_replays(dag_of(tmp_path))
    assert summary(replays) == {
        "duplicates": ["sink `lake`", "sink `extract`", "sink `bad`"],
        "replaced": ["sink `latest`"],
        "safe": ["sink `merged`", "error table"],
        "shown": ["sink `peek`"],
    }
    said = advice(replays)
    assert "sink `lake`, sink `extract`, sink `bad`" in said and "mode = merge" in said
    assert advice([r for r in replays if r.effect != DUPLICATES]) == ""


# -- through the CLI: the message, then a run over the re-read range ---------------------------


def _job_with_a_merge_sink(jobs: Path, wh: Path) -> None:
    """The crash harness's job (append sinks: Delta, Parquet, Avro, JSON; the error table) plus a
    Delta sink merging on ``id``."""
    write_job(jobs, wh)
    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["sinks"]["merged"] = {"type": "delta", "path": "out/merged", "mode": "merge", "keys": ["id"]}
    path.write_text(yaml.safe_dump(job))


def _same_bad_line(inputs: Inputs, name: str, times: int) -> None:
    """A file of ``times`` identical rejected lines (id 0), after every file ``inputs`` wrote."""
    inputs.mtime += 10
    path = inputs.root / "a" / name
    path.write_text('{"id": 0, "day": "2026-11-01", "amount": -5.0}\n' * times)
    os.utime(path, (inputs.mtime, inputs.mtime))


def _said(printed: list[str], effect: str, sink: str) -> bool:
    return any(line.split()[:1] == [effect] and sink in line for line in printed)


@pytest.mark.slow  # several runs of a job in one test (15-35 s): --quick takes cheaper ones
def test_a_rewind_names_the_sinks_that_get_duplicates_and_the_error_table_keeps_each_record_once(
    spark: Any, tmp_path: Path
) -> None:
    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    _job_with_a_merge_sink(jobs, wh)
    inputs = Inputs(wh)
    inputs.add("a", 10)  # ids 1-10, 7 rejected
    first_file = (inputs.mtime * 1000, inputs.last["a"])
    inputs.add("a", 10)  # ids 11-20, 14 rejected
    _same_bad_line(inputs, "twice.json", 2)  # the same bad line twice in one file: two rejections
    _same_bad_line(inputs, "once.json", 1)  # and once in another file: a third
    rejected = [0, 0, 0, 7, 14]
    assert run_here(jobs, wh)[0] == 0
    assert sink_ids(wh)["errors"] == rejected
    (dataset,) = watermarks(wh)

    printed: list[str] = []
    code, summary = run_here(
        jobs,
        wh,
        "mode=checkpoint",
        "checkpoint.action=rewind",
        f"checkpoint.dataset={dataset}",
        f"checkpoint.value='{first_file[0]}|{first_file[1]}'",
        "checkpoint.reason=replay the second file",
        printed=printed,
    )
    assert (code, summary["status"]) == (0, "CHANGED"), summary
    appended = ["sink `av`", "sink `js`", "sink `lake`", "sink `pq`"]  # the job file's sinks, sorted
    assert summary["replay"] == {"duplicates": appended, "safe": ["sink `merged`", "error table"]}
    text = "\n".join(printed)
    assert f"the next run of DAG {JOB} reads {dataset} again after" in text
    for sink in appended:
        assert _said(printed, "DUPLICATES", sink), text
    assert _said(printed, "SAFE", "sink `merged`") and "rows matching on (id) are updated" in text
    assert _said(printed, "SAFE", "error table") and "not added again" in text
    assert f"warning: {', '.join(appended)} will hold the re-read records twice" in text

    assert run_here(jobs, wh)[0] == 0
    found = sink_ids(wh)
    assert found["errors"] == rejected, "the error table took the re-read rejections again"
    again = [i for i in inputs.good if i > 10]
    assert found["delta"] == sorted(inputs.good + again), "the append sink holds the re-read range twice, as said"
    merged = DeltaTable(str(wh / "out" / "merged")).to_pyarrow_table().column("id").to_pylist()
    assert sorted(merged) == inputs.good

    code, summary = run_here(
        jobs, wh, "mode=checkpoint", "checkpoint.action=reset", f"checkpoint.dataset={dataset}", "checkpoint.reason=all"
    )
    assert (code, summary["replay"]["duplicates"]) == (0, appended), summary
