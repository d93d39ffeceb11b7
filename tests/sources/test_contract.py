"""Every built-in source keeps the source contract (``tests/sources/contract.py``)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from engine.sources import SOURCES
from tests.helpers import write_jsonl
from tests.sources.contract import IDS, SourceContract

_tables = itertools.count()


class TestFilesSource(SourceContract):
    type = "files"

    def source(self) -> dict[str, Any]:
        folder = self.lake.parent / "in"
        if not folder.exists():
            write_jsonl(folder / "a.json", [{"id": i} for i in IDS[:2]])
            write_jsonl(folder / "b.json", [{"id": i} for i in IDS[2:]])
        return {"type": "files", "format": "json", "path": f"{folder}/*.json", "schema": "id BIGINT"}

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {"type": "files", "format": "json", "path": str(self.lake.parent / "missing")}, "job.sources.in.path"


class TestDeltaSource(SourceContract):
    type = "delta"

    def source(self) -> dict[str, Any]:
        table = self.lake.parent / "table"
        if not table.exists():
            self.spark.createDataFrame([(i,) for i in IDS], "id BIGINT").write.format("delta").save(str(table))
        return {"type": "delta", "path": str(table)}

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {"type": "delta", "path": str(self.lake.parent / "no_table")}, "job.sources.in.path"


class TestJdbcSource(SourceContract):
    type = "jdbc"

    @pytest.fixture(autouse=True)
    def _table(self, postgres: Any) -> None:
        self.postgres = postgres
        self.table = f"contract_{next(_tables)}"
        postgres.psql(f"CREATE TABLE {self.table} (id BIGINT)")
        postgres.psql(f"INSERT INTO {self.table} VALUES {', '.join(f'({i})' for i in IDS)}")

    def source(self) -> dict[str, Any]:
        pg = self.postgres
        return {
            "type": "jdbc",
            "url": pg.jdbc_url,
            "table": self.table,
            "user": pg.user,
            "password": pg.password,
            "incremental": {"column": "id"},
            "partitions": 2,
        }

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {**self.source(), "query": "SELECT 1"}, "job.sources.in"


class TestKafkaSource(SourceContract):
    """A 3-partition topic of its own per test holding the ids as JSON values."""

    type = "kafka"

    @pytest.fixture(autouse=True)
    def _topic(self, kafka: Any) -> None:
        self.kafka = kafka
        self.topic = f"source_contract_{next(_tables)}"
        kafka.create_topic(self.topic, partitions=3)
        kafka.produce(self.topic, [json.dumps({"id": i}) for i in IDS], keys=[str(i) for i in IDS])

    def source(self) -> dict[str, Any]:
        return {
            "type": "kafka",
            "bootstrap_servers": self.kafka.bootstrap,
            "topics": [self.topic],
            "schema": "id BIGINT",
        }

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {**self.source(), "topics": ["no_such_topic"]}, "job.sources.in.topics"


def test_every_built_in_source_type_has_a_contract_subclass() -> None:
    """A new source cannot skip the contract (types a test registers from ``tests`` are not built in)."""
    built_in = {n for n in SOURCES.names() if SOURCES.get(n).impl.startswith("engine.")}
    covered = {cls.type for cls in SourceContract.__subclasses__()}
    assert built_in <= covered, f"no contract subclass for: {sorted(built_in - covered)}"
