"""A DAG's config is one of two kinds, selected by its ``copy`` key. No JVM."""

from __future__ import annotations

from typing import Any

import pytest

from engine.spec.model import CopyDagConf, DagConf, JobConf, RecordsDagConf

SOURCES = {"in": {"type": "files", "format": "json", "path": "x"}}


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        pytest.param({"sources": SOURCES}, RecordsDagConf, id="records"),
        pytest.param({"sources": SOURCES, "copy": None}, RecordsDagConf, id="copy-null"),
        pytest.param({"copy": {"source": "a", "target": "b"}}, CopyDagConf, id="copy"),
        pytest.param({"copy": {"source": "a", "target": "b"}, "persist": "NONE"}, CopyDagConf, id="copy-ignores"),
    ],
)
def test_the_copy_key_selects_the_kind(raw: dict[str, Any], kind: type) -> None:
    assert type(DagConf.model_validate(raw)) is kind


def test_a_job_and_its_dags_validate_each_as_their_own() -> None:
    job = JobConf.model_validate({"dags": {"a": {"sources": SOURCES}, "b": {"copy": {"source": "a", "target": "b"}}}})
    assert type(job) is JobConf
    assert [type(d) for d in job.dags.values()] == [RecordsDagConf, CopyDagConf]
    copy = job.dags["b"]
    assert isinstance(copy, CopyDagConf) and copy.copy_.target == "b"
