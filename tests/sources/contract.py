"""The contract every source keeps, run against each registered source on the session's Spark and
real input (files, a Delta table, PostgreSQL): plan, read, publish through a run, an empty batch,
a bad config. A source's test module subclasses :class:`SourceContract` and says how to make its
input; ``test_contract.py`` checks that every built-in source type has a subclass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine.columns import DATASET
from engine.commit import plan_codec
from engine.errors import ConfigError
from engine.sources import SOURCES
from engine.sources.base import PlanContext, Source
from engine.sources.workunits import Budget, WorkUnit
from engine.state.store import InMemoryMetadataStore, utcnow
from tests.helpers import compile_dict, delta_ids, run_with

IDS = [1, 2, 3]
"""The ``id`` of the records every source's input starts with."""


class SourceContract:
    """Subclasses set :attr:`type` and implement :meth:`source` and :meth:`bad_config`."""

    type: ClassVar[str]
    """The registry key of the source under test."""

    @pytest.fixture(autouse=True)
    def _context(self, spark: Any, lake: Path) -> None:
        self.spark = spark
        self.lake = lake

    def source(self) -> dict[str, Any]:
        """The source's config over input holding one record per :data:`IDS` (an ``id`` column)."""
        raise NotImplementedError

    def bad_config(self) -> tuple[dict[str, Any], str]:
        """A source config with a mistake, and the key path its :class:`ConfigError` names."""
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------------------

    def job(self, source: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "sources": {"in": source or self.source()},
            "sinks": {"out": {"type": "delta", "path": "out"}},
        }

    def built(self) -> Source:
        (dag,) = compile_dict(self.job(), self.lake).dags
        spec = dag.source  # type: ignore[union-attr]
        source: Source = SOURCES.get(self.type).load()(
            spec.conf, name=spec.name, key=spec.key, schema_ddl=spec.schema_ddl
        )
        return source

    def planned(self, source: Source) -> list[WorkUnit]:
        source.check(self.spark)
        ctx = PlanContext(state={}, per_dataset=Budget(), per_run=Budget(), now=utcnow())
        return source.plan(self.spark, ctx)

    # -- the contract --------------------------------------------------------------------------

    def test_plan_proposes_units_a_stored_plan_gives_back(self) -> None:
        units = self.planned(self.built())
        assert units and any(not u.empty for u in units)
        assert all(u.dataset for u in units)
        assert plan_codec.decode(json.loads(json.dumps(plan_codec.encode(units)))) == units

    def test_read_gives_every_record_with_its_dataset(self) -> None:
        source = self.built()
        units = self.planned(source)
        schema = source.schema(self.spark, units)
        assert schema is not None and "id" in schema.fieldNames()
        rows = source.read(self.spark, units, schema).select("id", DATASET).collect()
        assert sorted(int(r["id"]) for r in rows) == IDS
        assert {r[DATASET] for r in rows} <= {u.dataset for u in units}

    def test_a_run_stages_and_publishes_every_record(self) -> None:
        result = run_with(self.spark, self.job(), self.lake, InMemoryMetadataStore(), run=1)
        assert result.summary()["records_read"] == len(IDS)
        assert [int(i) for i in delta_ids(self.lake / "out")] == IDS

    def test_a_run_with_nothing_new_is_an_empty_batch(self) -> None:
        store = InMemoryMetadataStore()
        run_with(self.spark, self.job(), self.lake, store, run=1)
        again = run_with(self.spark, self.job(), self.lake, store, run=2)
        assert again.summary()["records_read"] == 0
        assert again.status == "SUCCEEDED"
        assert [int(i) for i in delta_ids(self.lake / "out")] == IDS
        assert all(u.empty for u in self.planned_with(store))

    def planned_with(self, store: InMemoryMetadataStore) -> list[WorkUnit]:
        source = self.built()
        source.check(self.spark)
        state = store.load_state("t", "t")
        ctx = PlanContext(
            state=state,
            per_dataset=Budget(),
            per_run=Budget(),
            now=utcnow(),
            files_read=lambda: store.files_read("t", "t"),
        )
        return source.plan(self.spark, ctx)

    def test_a_bad_config_is_a_config_error_naming_its_key(self) -> None:
        raw, key = self.bad_config()
        with pytest.raises(ConfigError) as info:
            run_with(self.spark, self.job(raw), self.lake, InMemoryMetadataStore(), run=1)
        assert info.value.key == key
        assert not (self.lake / "out").exists()
