"""The Kafka sink against a real broker: a Delta table's new rows sent as messages with the headers
that identify them, and its guarantee under crashes: at least once, every repeat carrying the
same (engine.batch, engine.record) headers, none at all unless the driver dies while sending.
Messages are read back with librdkafka (confluent-kafka), not Spark."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from engine.state.store import InMemoryMetadataStore
from tests.helpers import run_with

_names = itertools.count()


def append(spark: Any, table: Path, lo: int, hi: int) -> None:
    rows = [(i, f"c{i}", i * 2.5) for i in range(lo, hi)]
    spark.createDataFrame(rows, "id BIGINT, name STRING, amount DOUBLE").write.format("delta").mode("append").save(
        str(table)
    )


def job(kafka: Any, table: Path, topic: str, **sink: Any) -> dict[str, Any]:
    return {
        "sources": {"src": {"type": "delta", "path": str(table)}},
        "sinks": {"out": {"type": "kafka", "bootstrap_servers": kafka.bootstrap, "topic": topic, "key": "id", **sink}},
    }


def messages(kafka: Any, topic: str) -> list[dict[str, Any]]:
    out = []
    for _, _, key, value, headers in kafka.consume_all(topic):
        assert value is not None
        out.append({"key": key, "value": json.loads(value), "headers": {k: (v or b"").decode() for k, v in headers}})
    return out


def test_new_rows_become_messages_with_identifying_headers(spark: Any, lake: Path, kafka: Any) -> None:
    topic = f"out_{next(_names)}"
    kafka.create_topic(topic, partitions=3)
    table = lake / "src"
    store = InMemoryMetadataStore()
    append(spark, table, 0, 40)
    run_with(spark, job(kafka, table, topic), lake, store, run=1)
    append(spark, table, 40, 55)
    run_with(spark, job(kafka, table, topic), lake, store, run=2)
    run_with(spark, job(kafka, table, topic), lake, store, run=3)  # nothing new: nothing sent
    found = messages(kafka, topic)
    assert sorted(m["value"]["id"] for m in found) == list(range(55))
    assert all(m["key"] == str(m["value"]["id"]).encode() for m in found)
    assert found[0]["value"].keys() == {"id", "name", "amount"}
    batches = {m["headers"]["engine.batch"] for m in found}
    assert len(batches) == 2 and all(b.endswith((":out:1", ":out:2")) for b in batches)
    assert {m["headers"]["engine.job"] for m in found} == {"t"}
    assert not list((lake / "_engine" / "kafka_staging").rglob("*.parquet"))


def test_a_string_value_and_a_missing_column(spark: Any, lake: Path, kafka: Any) -> None:
    topic = f"names_{next(_names)}"
    kafka.create_topic(topic, partitions=1)
    table = lake / "src"
    append(spark, table, 0, 5)
    run_with(
        spark, job(kafka, table, topic, format="string", value_columns=["name"]), lake, InMemoryMetadataStore(), run=1
    )
    assert sorted(v for _, _, _, v, _ in kafka.consume_all(topic)) == [f"c{i}".encode() for i in range(5)]
    with pytest.raises(ConfigError) as missing:
        run_with(spark, job(kafka, table, topic, key="nope"), lake, InMemoryMetadataStore(), run=1)
    assert missing.value.key == "job.sinks.out.key"
    with pytest.raises(ConfigError, match="sends one column"):
        run_with(spark, job(kafka, table, topic, format="bytes"), lake, InMemoryMetadataStore(), run=1)


# The job's sequence: 1 send to Kafka, 2 delete staging, 3 set the watermark. mid_step:1 is after
# every message was sent and before the batch is marked sent.
@pytest.mark.crash
@pytest.mark.parametrize("point", ["after_staging", "mid_step:1", "after_step:1"])
def test_a_killed_run_then_reruns_send_every_row_with_repeats_identifiable(
    spark: Any, tmp_path: Path, kafka: Any, point: str
) -> None:
    import yaml

    from tests.commit.harness import crash_run, run_here

    topic = f"crash_out_{next(_names)}"
    kafka.create_topic(topic, partitions=3)
    wh, jobs, table = tmp_path / "wh", tmp_path / "jobs", tmp_path / "src"
    jobs.mkdir()
    (jobs / "crash.yaml").write_text(yaml.safe_dump(job(kafka, table, topic)))
    append(spark, table, 0, 50)

    crashed = crash_run(jobs, wh, kill_at=point)
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    append(spark, table, 50, 70)  # arrives while the job is down
    for _ in range(2):
        code, summary = run_here(jobs, wh)
        assert (code, summary["status"]) == (0, "SUCCEEDED"), summary

    found = messages(kafka, topic)
    ids = sorted(m["value"]["id"] for m in found)
    unique = {(m["headers"]["engine.batch"], m["headers"]["engine.record"]): m["value"]["id"] for m in found}
    assert sorted(unique.values()) == list(range(70))  # dropping repeats by headers: each row once
    if point == "mid_step:1":  # the first batch was sent twice, as the same messages
        assert len(ids) == 70 + 50
    else:
        assert ids == list(range(70))
