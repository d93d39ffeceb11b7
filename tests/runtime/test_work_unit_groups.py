"""Any number of datasets against any number of work-unit groups: packing puts some datasets alone
in a group and others together, and every mix must read, union and publish.

Found on real data: nine directory datasets with the default ``max_groups = 8`` failed every run
(a one-dataset group's frame lacked the dataset column, so the union with a two-dataset group
failed), and the stored plan then failed the same way on every later run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.converters.frame import DATASET
from engine.runtime.records import RecordsDag, union_groups
from engine.runtime.records.reading import group_frame
from engine.sources.workunits import MultiWorkUnit, Size, WorkUnit, pack
from engine.state.delta_store import DeltaMetadataStore
from engine.state.store import InMemoryMetadataStore
from tests.helpers import compile_dict, run_with, touch

T0 = time.time() - 86_400
DATASETS = range(1, 21)
GROUPS = range(1, 9)


@pytest.mark.parametrize("datasets", DATASETS)
@pytest.mark.parametrize("groups", GROUPS)
def test_packing_puts_every_unit_in_exactly_one_of_at_most_max_groups(datasets: int, groups: int) -> None:
    units = [WorkUnit(f"d{i}", None, None, size=Size(bytes=100 + 7 * i)) for i in range(datasets)]
    packed = pack(units, max_groups=groups)
    assert len(packed) == min(datasets, groups)
    assert sorted(u.dataset for g in packed for u in g.units) == sorted(u.dataset for u in units)
    assert all(g.units for g in packed)


def landing(root: Path, datasets: int, *, rows: int = 3) -> Path:
    """``datasets`` directories of one JSON file each: dataset ``i`` holds ids ``i*100 ..``."""
    for i in range(datasets):
        touch(root / f"d{i:02d}" / "part.json", [{"id": i * 100 + r, "v": f"d{i}"} for r in range(rows)], mtime=T0 + i)
    return root


def job(root: Path, *, groups: int | None = None, policy: str = "full") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "sources": {
            "in": {
                "type": "files",
                "format": "json",
                "path": str(root / "*" / "*.json"),
                "datasets": "directory",
                "schema": "id INT, v STRING",
            }
        },
        "converters": [{"type": "check", "expr": "id % 100 != 2", "reason": "every third row is rejected"}],
        "sinks": {"out": {"type": "delta", "path": "out"}},
        "publish": {"policy": policy},
    }
    if groups is not None:
        spec["work_units"] = {"max_groups": groups}
    return spec


@pytest.mark.slow  # 160 unions analysed by Spark (15-25 s): --quick takes cheaper ones
def test_every_mix_of_group_sizes_unions_into_one_frame(spark: Any, lake: Path) -> None:
    """1 to 20 datasets against 1 to 8 groups: whatever sizes packing gives the groups, their
    frames, as the run builds them, line up in one union (analysed by Spark, nothing read). A
    group's frame depends on its size only (one dataset or several), so one frame per size is
    built and each combination unions the frames of its sizes."""
    root = landing(lake.parent / "land", max(DATASETS))
    dag = RecordsDag(compile_dict(job(root), lake).dags[0], job="t", run_id="r")  # type: ignore[arg-type]
    plan = dag.plan(spark, _context(max(DATASETS)))
    assert plan is not None
    units = sorted((u for u in plan.units if not u.empty), key=lambda u: u.dataset)
    frames: dict[int, Any] = {}

    def frame_of(group: MultiWorkUnit) -> Any:
        size = len(group.units)
        if size not in frames:
            frames[size] = group_frame(dag.parts, spark, plan, MultiWorkUnit(units[:size]))
        return frames[size]

    mixes = set()
    for datasets in DATASETS:
        for groups in GROUPS:
            packed = pack(units[:datasets], max_groups=groups)
            mixes.add(tuple(sorted(len(g.units) for g in packed)))
            union = union_groups([(g, frame_of(g)) for g in packed])
            assert DATASET in union.columns, (datasets, groups)
            assert union.schema is not None  # analysed: a column mismatch raises here
    assert (1, 2) in mixes and (1, 1, 2) in mixes  # the mixes that failed on real data


def _context(datasets: int) -> Any:
    """A plan context that keeps only the first ``datasets`` directories (the rest throttled out)."""
    from datetime import datetime

    from engine.sources.base import PlanContext
    from engine.sources.workunits import Budget

    return PlanContext(
        state={},
        per_dataset=Budget(),
        per_run=Budget(max_files=datasets),
        now=datetime.utcnow(),
        guarantee=True,
    )


@pytest.mark.parametrize(
    ("datasets", "groups", "policy"),
    [
        pytest.param(3, 2, "full", id="3-in-2-full"),
        pytest.param(3, 2, "partial", id="3-in-2-partial"),
        pytest.param(9, None, "full", id="9-in-default-8"),
        pytest.param(20, 7, "partial", id="20-in-7"),
        pytest.param(5, 8, "full", id="5-alone-each"),
        pytest.param(6, 1, "full", id="6-in-1"),
    ],
)
def test_a_run_publishes_every_dataset_whatever_the_groups(
    spark: Any, lake: Path, caplog: pytest.LogCaptureFixture, datasets: int, groups: int | None, policy: str
) -> None:
    root = landing(lake.parent / "land", datasets)
    store = InMemoryMetadataStore()
    with caplog.at_level("WARNING", logger="engine.runtime.records"):
        first = run_with(spark, job(root, groups=groups, policy=policy), lake, store, run=1)
    # a group of several datasets is counted in its one pass, not failed and retried one by one
    assert not [r.message for r in caplog.records if "retrying them one by one" in r.message]
    again = run_with(spark, job(root, groups=groups, policy=policy), lake, store, run=2)

    assert first.status == "SUCCEEDED", first.dags[0].message
    assert first.summary()["records_read"] == 3 * datasets
    assert first.summary()["errors"] == datasets
    from deltalake import DeltaTable

    published = DeltaTable(str(lake / "out")).to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in published) == sorted(i * 100 + r for i in range(datasets) for r in (0, 1))
    assert {r["v"] for r in published} == {f"d{i}" for i in range(datasets)}
    assert again.status == "SUCCEEDED" and again.summary()["records_read"] == 0


def test_a_stored_plan_of_mixed_groups_is_re_executed_and_published(spark: Any, lake: Path) -> None:
    """A run that stored its plan and died is re-executed by the next run: the plan's groups mix
    one-dataset and two-dataset groups, and the re-execution must publish them all."""
    root = landing(lake.parent / "land", 3)
    store = DeltaMetadataStore(spark, str(lake / "_engine")).ensure()
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    spec = compile_dict(job(root, groups=2), lake)
    manager = JobManager(spark, store)
    planned = manager.plan(spec, "run-1")
    (dag,) = planned.dags
    assert dag.plan is not None and dag.batch is not None
    planned.metadata.begin(dag.dag, dag.plan.units, dag.batch, reused=False)  # stored, then the run dies

    second = JobManager(spark, store).run(spec, "run-2", InMemoryRunStore())
    assert second.status == "SUCCEEDED", second.dags[0].message
    assert second.summary()["records_read"] == 9
    from tests.helpers import delta_ids

    assert delta_ids(lake / "out") == [0, 1, 100, 101, 200, 201]
