"""A batch given up after a Delta sink staged it leaves no file in the table's directory (found by
the catalogue's pass, issue 58): Delta's writer stages a plain append as files in the table's
folder, named by no commit, so a refused batch left them there, and for a table the batch was to
create, a Parquet reader of the folder read the refused rows. Read with pyarrow and delta-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with, write_jsonl


def data_files(folder: Path) -> list[str]:
    """The Parquet files under ``folder`` a reader of the folder would take (not the engine's nor Delta's)."""
    if not folder.exists():
        return []
    return sorted(
        str(f.relative_to(folder))
        for f in folder.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in f.relative_to(folder).parts)
    )


def job(inputs: Path, **extra: Any) -> dict[str, Any]:
    return {
        "sources": {"in": {"type": "files", "format": "json", "path": str(inputs), "schema": "id INT, v INT"}},
        "converters": [{"type": "check", "expr": "v > 0", "reason": "v must be positive", "max_rejected": 0}],
        "sinks": {"lake": {"type": "delta", "path": "lake", "partition_by": ["id"]}},
        **extra,
    }


def test_a_refused_first_batch_leaves_no_file_where_its_table_would_be(spark: Any, lake: Path, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "in" / "a.json", [{"id": 1, "v": 1}, {"id": 2, "v": -1}])
    summary = run_with(spark, job(tmp_path / "in"), lake, InMemoryMetadataStore(), run=1).summary()
    assert summary["status"] == "FAILED", summary
    assert data_files(lake / "lake") == []
    assert not (lake / "lake").exists(), "the folder of the table the batch would create"


def test_a_refused_batch_leaves_no_file_of_its_own_in_an_existing_table(spark: Any, lake: Path, tmp_path: Path) -> None:
    store = InMemoryMetadataStore()
    write_jsonl(tmp_path / "in" / "a.json", [{"id": 1, "v": 1}])
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=1).summary()["status"] == "SUCCEEDED"
    write_jsonl(tmp_path / "in" / "b.json", [{"id": 3, "v": 3}, {"id": 4, "v": -4}])
    assert run_with(spark, job(tmp_path / "in"), lake, store, run=2).summary()["status"] == "FAILED"
    table = DeltaTable(str(lake / "lake"))
    logged = sorted(str(Path(u.removeprefix("file://")).relative_to(lake / "lake")) for u in table.file_uris())
    assert data_files(lake / "lake") == logged, "every file in the folder is one the log names"
    assert [r["id"] for r in table.to_pyarrow_table().to_pylist()] == [1]
    assert not (lake / "lake" / "id=3").exists() and not (lake / "lake" / "id=4").exists()


def test_a_sink_that_fails_staging_takes_what_the_others_staged_with_it(spark: Any, lake: Path, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "in" / "a.json", [{"id": 1, "v": 1}])
    (lake / "blocked").write_text("a file where the extract's folder would be\\n")
    spec = job(
        tmp_path / "in",
        sinks={"lake": {"type": "delta", "path": "lake"}, "extract": {"type": "parquet", "path": "blocked"}},
    )
    spec["converters"] = []
    summary = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1).summary()
    assert summary["status"] == "FAILED", summary
    assert data_files(lake / "lake") == [] and not (lake / "lake").exists()
