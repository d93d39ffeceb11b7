"""The contract every sink keeps, run against each registered sink type on the session's Spark and
real output (Delta tables, files, stdout): the plan checks and writes nothing, a staged batch is
invisible until its commit steps run, a run writes its branch, an empty branch stages nothing
(unless the sink says it writes one), a bad config names its key. A sink's test module subclasses
:class:`SinkContract` and says how to read what it wrote; ``test_contract.py`` checks that every
built-in sink type has a subclass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine.commit.batch import BatchRef
from engine.commit.steps import CommitStep, StepContext
from engine.errors import ConfigError
from engine.runtime.records import RecordsDag
from engine.sinks import SINKS
from engine.sinks.base import Sink
from engine.state.store import InMemoryMetadataStore
from engine.storage.hadoop import HadoopFs
from tests.helpers import compile_dict, run_with, write_jsonl

IDS = [1, 2, 3]
"""The ``id`` of the valid records every test writes."""


class SinkContract:
    """Subclasses set :attr:`type` and implement :meth:`read_back` and :meth:`bad_config`."""

    type: ClassVar[str]
    """The registry key of the sink under test."""
    publishes: ClassVar[bool] = True
    """Whether staging hides the batch until its commit steps run (a console sink prints at once)."""

    @pytest.fixture(autouse=True)
    def _context(self, spark: Any, lake: Path) -> None:
        self.spark = spark
        self.lake = lake

    def sink(self) -> dict[str, Any]:
        return {"type": self.type, "path": "out"}

    def read_back(self) -> list[int]:
        """The ``id`` of every record a reader of the sink sees now, sorted."""
        raise NotImplementedError

    def bad_config(self) -> tuple[dict[str, Any], str]:
        """A sink config with a mistake, and the key path its :class:`ConfigError` names."""
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------------

    def job(self, sink: dict[str, Any] | None = None) -> dict[str, Any]:
        folder = self.lake.parent / "in"
        return {
            "sources": {"in": {"type": "files", "format": "json", "path": f"{folder}/*.json", "schema": "id BIGINT"}},
            "converters": [{"type": "check", "expr": "id > 0"}],
            "sinks": {"out": sink or self.sink()},
        }

    def write_input(self, name: str, ids: list[int]) -> None:
        write_jsonl(self.lake.parent / "in" / name, [{"id": i} for i in ids])

    def built(self) -> Sink:
        (dag,) = compile_dict(self.job(), self.lake).dags
        spec = dag.sinks[0]  # type: ignore[union-attr]
        sink: Sink = SINKS.get(self.type).load()(spec.conf, name=spec.name, key=spec.key)
        return sink

    # -- the contract --------------------------------------------------------------------------

    def test_planning_checks_the_branch_and_writes_nothing(self) -> None:
        self.write_input("a.json", IDS)
        (spec,) = compile_dict(self.job(), self.lake).dags
        RecordsDag(spec, job="t", run_id="r1").validate(self.spark)  # type: ignore[arg-type]
        assert self.read_back() == []
        assert list(self.lake.iterdir()) == []

    def test_a_staged_batch_is_seen_only_once_its_steps_run(self) -> None:
        sink = self.built()
        frame = self.spark.createDataFrame([(i,) for i in IDS], "id BIGINT")
        sink.check(frame)
        fs = HadoopFs(self.spark)
        staged = sink.stage(frame, BatchRef("t", "t", 1), fs)
        assert self.read_back() == ([] if self.publishes else IDS)
        steps = [CommitStep.from_json(json.loads(json.dumps(s.to_json()))) for s in staged.steps]
        assert bool(steps) is self.publishes
        ctx = StepContext(self.spark, InMemoryMetadataStore(), fs, locations=sink.locations("t"))
        for step in steps:
            step.execute(ctx)
        assert self.read_back() == IDS

    def test_a_run_writes_its_branch(self) -> None:
        self.write_input("a.json", [*IDS, -1])
        result = run_with(self.spark, self.job(), self.lake, InMemoryMetadataStore(), run=1)
        assert result.summary()["sinks"] == {"t.out": len(IDS)}
        assert self.read_back() == IDS

    def test_an_empty_branch_is_staged_only_if_the_sink_says_so(self) -> None:
        store = InMemoryMetadataStore()
        self.write_input("a.json", IDS)
        run_with(self.spark, self.job(), self.lake, store, run=1)
        self.write_input("b.json", [-1, -2])  # rejected: the valid branch is empty
        (dag,) = compile_dict(self.job(), self.lake).dags
        empties = dag.sinks[0].conf.stages_empty  # type: ignore[union-attr,attr-defined]
        second = run_with(self.spark, self.job(), self.lake, store, run=2)
        assert second.summary()["records_read"] == 2
        assert self.read_back() == ([] if empties else IDS)

    def test_a_bad_config_is_a_config_error_naming_its_key(self) -> None:
        raw, key = self.bad_config()
        with pytest.raises(ConfigError) as info:
            compile_dict(self.job(raw), self.lake)
        assert info.value.key == key


class TableSinkContract(SinkContract):
    """Sinks with a ``mode``: an overwrite of an empty branch leaves the path empty."""

    def test_an_overwrite_of_an_empty_branch_empties_the_path(self) -> None:
        store = InMemoryMetadataStore()
        overwrite = {**self.sink(), "mode": "overwrite"}
        self.write_input("a.json", IDS)
        run_with(self.spark, self.job(overwrite), self.lake, store, run=1)
        assert self.read_back() == IDS
        self.write_input("b.json", [-1])
        run_with(self.spark, self.job(overwrite), self.lake, store, run=2)
        assert self.read_back() == []
