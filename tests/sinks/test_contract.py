"""Every built-in sink type keeps the sink contract (``tests/sinks/contract.py``)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.sinks import SINKS
from tests.sinks.contract import SinkContract, TableSinkContract

_names = itertools.count()


class TestDeltaSink(TableSinkContract):
    type = "delta"

    def read_back(self) -> list[int]:
        if not (self.lake / "out" / "_delta_log").exists():
            return []
        return sorted(DeltaTable(str(self.lake / "out")).to_pyarrow_table().column("id").to_pylist())

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {"type": "delta", "path": "out", "mode": "merge"}, "job.sinks.out"


class FilesSinkContract(TableSinkContract):
    """Read back with Spark's own reader, from the files a reader sees (staging is hidden)."""

    read_options: dict[str, str] = {}

    def read_back(self) -> list[int]:
        out = self.lake / "out"
        visible = [
            p for p in out.rglob("*") if p.is_file() and not any(part[0] in "_." for part in p.relative_to(out).parts)
        ]
        if not visible:
            return []
        # An overwrite of an empty branch leaves empty JSON/CSV files: nothing to infer a schema from.
        reader = self.spark.read.format(self.type).options(**self.read_options).schema("id BIGINT")
        frame = reader.load(str(out))
        return sorted(int(r["id"]) for r in frame.select("id").collect())

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {"type": self.type, "path": "out", "mode": "merge", "keys": ["id"]}, "job.sinks.out"


class TestParquetSink(FilesSinkContract):
    type = "parquet"


class TestAvroSink(FilesSinkContract):
    type = "avro"


class TestJsonSink(FilesSinkContract):
    type = "json"


class TestCsvSink(FilesSinkContract):
    type = "csv"
    read_options = {"header": "true"}

    def sink(self) -> dict[str, Any]:
        return {"type": "csv", "path": "out", "options": {"header": True}}


class TestConsoleSink(SinkContract):
    type = "console"
    publishes = False

    @pytest.fixture(autouse=True)
    def _stdout(self, capfd: pytest.CaptureFixture[str]) -> None:
        self.capfd = capfd
        self.printed = ""

    def sink(self) -> dict[str, Any]:
        return {"type": "console"}

    def read_back(self) -> list[int]:
        """The ids ``show()`` printed so far (a console keeps nothing: what it printed is its output)."""
        self.printed += self.capfd.readouterr().out
        return sorted(int(i) for i in re.findall(r"^\|\s*(-?\d+)\s*\|$", self.printed, re.MULTILINE))

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {"type": "console", "rows": 0}, "job.sinks.out.rows"


class TestJdbcSink(TableSinkContract):
    """Into a PostgreSQL table of its own per test, read back with ``psql``."""

    type = "jdbc"

    @pytest.fixture(autouse=True)
    def _table(self, postgres: Any) -> None:
        self.postgres = postgres
        self.table = f"sink_contract_{next(_names)}"
        postgres.psql(f"CREATE TABLE {self.table} (id BIGINT)")

    def sink(self) -> dict[str, Any]:
        pg = self.postgres
        return {"type": "jdbc", "url": pg.jdbc_url, "user": pg.user, "password": pg.password, "table": self.table}

    def read_back(self) -> list[int]:
        return sorted(int(v) for v in self.postgres.psql(f"SELECT id FROM {self.table}").split())

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {**self.sink(), "mode": "upsert"}, "job.sinks.out"


class TestKafkaSink(SinkContract):
    """Into a topic of its own per test, read back with librdkafka."""

    type = "kafka"

    @pytest.fixture(autouse=True)
    def _topic(self, kafka: Any) -> None:
        self.kafka = kafka
        self.topic = f"sink_contract_{next(_names)}"
        kafka.create_topic(self.topic, partitions=2)

    def sink(self) -> dict[str, Any]:
        return {"type": "kafka", "bootstrap_servers": self.kafka.bootstrap, "topic": self.topic}

    def read_back(self) -> list[int]:
        return sorted(json.loads(v)["id"] for _, _, _, v, _ in self.kafka.consume_all(self.topic) if v is not None)

    def bad_config(self) -> tuple[dict[str, Any], str]:
        return {**self.sink(), "format": "string"}, "job.sinks.out"


def test_every_built_in_sink_type_has_a_contract_subclass() -> None:
    """A new sink cannot skip the contract (types a test registers from ``tests`` are not built in)."""
    built_in = {n for n in SINKS.names() if SINKS.get(n).impl.startswith("engine.")}
    covered: set[str] = set()
    todo: list[type[SinkContract]] = [SinkContract]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "type" in cls.__dict__:
            covered.add(cls.type)
    assert built_in <= covered, f"no contract subclass for: {sorted(built_in - covered)}"
