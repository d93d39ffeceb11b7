"""``renamed``: a spec compiled under one job name, renamed, is what compiling under the other
name gives (the flow compiler keeps hop jobs compiled once and renames them per hop). No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.spec import compile_job, renamed

AS = "@compiled@"
"""The name the kept spec is compiled under: no config holds it."""

RECORDS = {
    "sources": {"orders": {"type": "files", "format": "json", "path": "in/*.json"}},
    "sinks": {"lake": {"type": "delta", "path": "orders", "from": "valid"}},
}
COPY = {"copy": {"source": "landing", "target": "/replica/x"}}

JOBS = {
    "records, default error table": RECORDS,
    "records, error table given": {**RECORDS, "errors": {"path": "_errors/mine"}},
    "records, no error table": {**RECORDS, "errors": {"enabled": False}},
    "records, its own name": {**RECORDS, "name": "fixed"},
    "copy, default events": COPY,
    "copy, events given": {"copy": {**COPY["copy"], "events": {"path": "/events/x"}}},
    "copy, no events": {"copy": {**COPY["copy"], "events": {"enabled": False}}},
    "several DAGs": {
        "dags": {"first": RECORDS, "second": {"copy": {"source": "/a", "target": "/b"}, "after": ["first"]}},
    },
    "a fan-out": {
        "fan_out": {
            "datasets": ["x", "y"],
            "template": {"copy": {"source": "landing/{dataset}", "target": "/replica/{dataset}"}},
        }
    },
}


@pytest.mark.parametrize("raw", list(JOBS.values()), ids=list(JOBS))
def test_renaming_gives_what_compiling_under_the_name_gives(tmp_path: Path, raw: dict[str, Any]) -> None:
    warehouse = str(tmp_path / "lake")
    jobs = tmp_path / "jobs"
    kept = compile_job(raw, name=AS, file=str(jobs / "one.conf"), warehouse=warehouse)
    for name, file in (("flow.g.f.a_b", str(jobs / "two.conf")), ("other", str(jobs / "one.conf"))):
        expected = compile_job(raw, name=name, file=file, warehouse=warehouse)
        assert renamed(kept, name, compiled_as=AS, file=file) == expected
    assert kept == compile_job(raw, name=AS, file=str(jobs / "one.conf"), warehouse=warehouse), "kept unchanged"


def test_the_places_follow_the_name(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "lake")
    records = renamed(compile_job(RECORDS, name=AS, file=None, warehouse=warehouse), "new", compiled_as=AS, file=None)
    (dag,) = records.dags
    assert (records.name, dag.name, dag.error_table) == ("new", "new", f"{warehouse}/_errors/new")
    copy = renamed(compile_job(COPY, name=AS, file=None, warehouse=warehouse), "new", compiled_as=AS, file=None)
    (cdag,) = copy.dags
    assert cdag.manifests_dir == f"{warehouse}/_engine/copy_manifests/new"  # type: ignore[union-attr]
    assert cdag.events_dir == f"{warehouse}/_engine/copy_events/new"  # type: ignore[union-attr]


def test_a_job_that_names_itself_keeps_its_name(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "lake")
    spec = compile_job({**RECORDS, "name": "fixed"}, name=AS, file=None, warehouse=warehouse)
    again = renamed(spec, "other", compiled_as=AS, file=None)
    assert again is spec and again.name == "fixed"
