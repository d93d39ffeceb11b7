"""The Kafka source against a real broker (KRaft, ``tests/kafka.py``): each topic a dataset, the
per-partition offsets its watermark, every message exactly once across runs, throttling split
across partitions, partitions added, data loss stopped or noted, and values that do not parse in
the error table with where they came from. Outputs are read back with delta-rs."""

from __future__ import annotations

import base64
import io
import itertools
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError, JobFailedError
from engine.sources.kafka import split_fairly
from engine.state.store import InMemoryMetadataStore
from engine.state.watermarks import MultiLongWatermark
from tests.helpers import delta_ids, run_with

_names = itertools.count()


@pytest.fixture
def topic(kafka: Any) -> str:
    name = f"events_{next(_names)}"
    kafka.create_topic(name, partitions=3)
    return name


def produce(kafka: Any, topic: str, ids: range, **extra: Any) -> None:
    values = [json.dumps({"id": i, "amount": i * 1.5, "note": f"n{i}"}) for i in ids]
    kafka.produce(topic, values, keys=[f"k{i}" for i in ids], **extra)


def job(kafka: Any, topics: list[str] | None = None, **source: Any) -> dict[str, Any]:
    where: dict[str, Any] = {"topics": topics} if topics is not None else {}
    return {
        "sources": {
            "bus": {
                "type": "kafka",
                "bootstrap_servers": kafka.bootstrap,
                "format": "json",
                "schema": "id BIGINT, amount DOUBLE, note STRING",
                **where,
                **source,
            }
        },
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }


def marks(store: InMemoryMetadataStore) -> dict[str, Any]:
    return {d: s.watermark for d, s in store.load_state("t", "t").items()}


def test_three_runs_read_every_message_exactly_once(spark: Any, lake: Path, kafka: Any, topic: str) -> None:
    store = InMemoryMetadataStore()
    spec = job(kafka, [topic])
    produce(kafka, topic, range(0, 90))
    first = run_with(spark, spec, lake, store, run=1)
    produce(kafka, topic, range(90, 130))
    second = run_with(spark, spec, lake, store, run=2)
    produce(kafka, topic, range(130, 200))
    third = run_with(spark, spec, lake, store, run=3)
    idle = run_with(spark, spec, lake, store, run=4)
    assert [r.summary()["records_read"] for r in (first, second, third, idle)] == [90, 40, 70, 0]
    assert delta_ids(lake / "out") == list(range(200))
    ends = {p: end for p, (_, end) in kafka.offsets(topic).items()}
    assert marks(store) == {f"kafka:{topic}": MultiLongWatermark(tuple(ends[p] for p in range(3)))}
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake / "out")).to_pyarrow_table().to_pylist()
    by_id = {r["id"]: r for r in rows}
    consumed = {json.loads(v)["id"]: (p, o, k.decode()) for p, o, k, v, _ in kafka.consume_all(topic)}
    assert {i: (r["kafka_partition"], r["kafka_offset"], r["kafka_key"]) for i, r in by_id.items()} == consumed
    assert {r["kafka_topic"] for r in rows} == {topic}
    assert all(r["kafka_timestamp"] is not None for r in rows)


def test_max_records_is_split_fairly_across_partitions(spark: Any, lake: Path, kafka: Any, topic: str) -> None:
    store = InMemoryMetadataStore()
    for partition, count in ((0, 30), (1, 5), (2, 30)):
        kafka.produce(topic, [json.dumps({"id": partition * 100 + i}) for i in range(count)], partition=partition)
    spec = job(kafka, [topic], limits={"max_records": 25})
    first = run_with(spark, spec, lake, store, run=1)
    assert first.summary()["records_read"] == 25
    assert marks(store)[f"kafka:{topic}"] == MultiLongWatermark((10, 5, 10))  # 5 short: 10 each for 0 and 2
    reads = [run_with(spark, spec, lake, store, run=n).summary()["records_read"] for n in range(2, 5)]
    assert reads == [25, 15, 0]
    assert delta_ids(lake / "out") == sorted([*range(30), *range(100, 105), *range(200, 230)])


def test_split_fairly_gives_what_short_partitions_leave_to_the_others() -> None:
    assert split_fairly([30, 5, 30], 25) == [10, 5, 10]
    assert split_fairly([10, 10, 10], 7) == [2, 2, 3]
    assert split_fairly([0, 4, 100], 50) == [0, 4, 46]
    assert split_fairly([3, 3], 100) == [3, 3]
    assert split_fairly([5, 5], 0) == [0, 0]


def test_a_partition_added_between_runs_is_read_from_its_first_offset(
    spark: Any, lake: Path, kafka: Any, topic: str
) -> None:
    store = InMemoryMetadataStore()
    spec = job(kafka, [topic])
    produce(kafka, topic, range(0, 30))
    run_with(spark, spec, lake, store, run=1)
    kafka.add_partitions(topic, 4)
    kafka.produce(topic, [json.dumps({"id": i}) for i in range(30, 40)], partition=3)
    produce(kafka, topic, range(40, 50))
    second = run_with(spark, spec, lake, store, run=2)
    assert second.summary()["records_read"] == 20
    assert delta_ids(lake / "out") == list(range(50))
    assert len(marks(store)[f"kafka:{topic}"].values) == 4


def test_a_new_topic_starts_at_latest_when_told(spark: Any, lake: Path, kafka: Any, topic: str) -> None:
    store = InMemoryMetadataStore()
    spec = job(kafka, [topic], starting_offsets="latest")
    produce(kafka, topic, range(0, 30))  # before the first run: never read
    assert run_with(spark, spec, lake, store, run=1).summary()["records_read"] == 0
    produce(kafka, topic, range(30, 45))
    assert run_with(spark, spec, lake, store, run=2).summary()["records_read"] == 15
    assert delta_ids(lake / "out") == list(range(30, 45))


def test_deleted_offsets_stop_the_dag_and_skip_notes_the_gap(spark: Any, lake: Path, kafka: Any, topic: str) -> None:
    store = InMemoryMetadataStore()
    for partition in range(3):
        kafka.produce(topic, [json.dumps({"id": partition * 100 + i}) for i in range(10)], partition=partition)
    run_with(spark, job(kafka, [topic]), lake, store, run=1)
    for partition in range(3):
        kafka.produce(topic, [json.dumps({"id": partition * 100 + i}) for i in range(10, 20)], partition=partition)
    kafka.delete_records(topic, 1, 14)  # retention ran first: offsets 10..13 of partition 1 are gone
    before = marks(store)

    with pytest.raises(JobFailedError) as failed:
        run_with(spark, job(kafka, [topic]), lake, store, run=2)
    message = str(failed.value)
    assert f"data loss in Kafka topic {topic}" in message
    assert "partition 1: offsets 10..13" in message and "4 message(s)" in message
    assert "on_data_loss = skip" in message
    assert marks(store) == before
    assert len(delta_ids(lake / "out")) == 30

    skipped = run_with(spark, job(kafka, [topic], on_data_loss="skip"), lake, store, run=3)
    assert skipped.summary()["records_read"] == 26
    (outcome,) = [d for dag in skipped.dags for d in dag.datasets if d.unit.dataset == f"kafka:{topic}"]
    assert "data loss (on_data_loss = skip): partition 1: offsets 10..13" in outcome.message
    gone = {110, 111, 112, 113}
    everything = {p * 100 + i for p in range(3) for i in range(20)}
    assert delta_ids(lake / "out") == sorted(everything - gone)
    assert marks(store)[f"kafka:{topic}"] == MultiLongWatermark((20, 20, 20))


def test_a_topic_recreated_with_fewer_offsets_is_data_loss(spark: Any, lake: Path, kafka: Any) -> None:
    name = f"recreated_{next(_names)}"
    kafka.create_topic(name, partitions=3)
    store = InMemoryMetadataStore()
    produce(kafka, name, range(0, 60))
    run_with(spark, job(kafka, [name]), lake, store, run=1)
    kafka.delete_topic(name)
    kafka.create_topic(name, partitions=2)
    produce(kafka, name, range(60, 64))
    with pytest.raises(JobFailedError, match=r"partition 2: offsets from \d+ \(the partition is gone"):
        run_with(spark, job(kafka, [name]), lake, store, run=2)
    skipped = run_with(spark, job(kafka, [name], on_data_loss="skip"), lake, store, run=3)
    assert skipped.summary()["records_read"] == 4
    assert delta_ids(lake / "out") == list(range(64))


def test_malformed_json_goes_to_the_error_table_with_its_offsets(
    spark: Any, lake: Path, kafka: Any, topic: str
) -> None:
    good = [json.dumps({"id": 1, "amount": 2.5}), json.dumps({"id": 2, "amount": 3.0})]
    bad = ["not json at all", json.dumps({"id": 3, "amount": "lots"})]
    kafka.produce(topic, [*good, *bad], keys=["a", "b", "c", "d"], partition=2)
    result = run_with(spark, job(kafka, [topic]), lake, InMemoryMetadataStore(), run=1)
    assert result.summary()["errors"] == 2
    assert delta_ids(lake / "out") == [1, 2]
    from deltalake import DeltaTable

    errors = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    records = sorted((json.loads(e["record"]) for e in errors), key=lambda r: r["offset"])
    assert [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in records] == [
        (topic, 2, 2, "c", "not json at all"),
        (topic, 2, 3, "d", bad[1]),
    ]
    reasons = {json.loads(e["record"])["offset"]: e["reasons"] for e in errors}
    assert "amount" in reasons[3][0] and "DOUBLE" in reasons[3][0]
    assert {e["step"] for e in errors} == {"read"}


AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
}


def _avro(record: dict[str, Any], *, schema_id: int | None = 7) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), record)
    return (b"\x00" + struct.pack(">I", schema_id) if schema_id is not None else b"") + out.getvalue()


def test_avro_values_in_the_confluent_wire_format(spark: Any, lake: Path, kafka: Any, topic: str) -> None:
    good = [_avro({"id": i, "note": f"n{i}"}) for i in range(5)]
    headerless = _avro({"id": 99, "note": "x"}, schema_id=None)
    truncated = _avro({"id": 100, "note": "a long enough note"})[:8]
    kafka.produce(topic, [*good, headerless, truncated], partition=0)
    spec = job(kafka, [topic], format="avro", schema=json.dumps(AVRO_SCHEMA), confluent_wire=True)
    result = run_with(spark, spec, lake, InMemoryMetadataStore(), run=1)
    assert delta_ids(lake / "out") == list(range(5))
    assert result.summary()["errors"] == 2
    from deltalake import DeltaTable

    errors = DeltaTable(str(lake / "_errors" / "t")).to_pyarrow_table().to_pylist()
    by_offset = {json.loads(e["record"])["offset"]: e for e in errors}
    assert sorted(by_offset) == [5, 6]
    assert base64.b64decode(json.loads(by_offset[5]["record"])["value"]) == headerless
    assert "Confluent wire header" in by_offset[5]["reasons"][0]
    assert "does not decode as Avro" in by_offset[6]["reasons"][0]


def test_a_pattern_makes_each_matching_topic_a_dataset(spark: Any, lake: Path, kafka: Any) -> None:
    prefix = f"shop{next(_names)}"
    for name in ("orders", "payments"):
        kafka.create_topic(f"{prefix}.{name}", partitions=3)
    kafka.create_topic(f"other{prefix}", partitions=1)
    produce(kafka, f"{prefix}.orders", range(0, 10))
    produce(kafka, f"{prefix}.payments", range(10, 25))
    produce(kafka, f"other{prefix}", range(100, 105))
    store = InMemoryMetadataStore()
    result = run_with(spark, job(kafka, pattern=rf"{prefix}\..*", format="json"), lake, store, run=1)
    assert result.summary()["records_read"] == 25
    assert sorted(marks(store)) == [f"kafka:{prefix}.orders", f"kafka:{prefix}.payments"]
    assert delta_ids(lake / "out") == list(range(25))


def test_config_mistakes_are_clear(spark: Any, lake: Path, kafka: Any) -> None:
    with pytest.raises(ConfigError) as missing:
        run_with(spark, job(kafka, ["no_such_topic"]), lake, InMemoryMetadataStore(), run=1)
    assert missing.value.key == "job.sources.bus.topics" and "no_such_topic" in str(missing.value)
    with pytest.raises(ConfigError, match="needs `schema`"):
        run_with(spark, job(kafka, ["x"], schema=None), lake, InMemoryMetadataStore(), run=1)
    with pytest.raises(ConfigError, match="exactly one of `topics` and `pattern`"):
        run_with(spark, job(kafka, ["x"], pattern="x.*"), lake, InMemoryMetadataStore(), run=1)
    with pytest.raises(ConfigError, match="kafka_offset"):
        spec = job(kafka, ["x"], schema="id BIGINT, kafka_offset BIGINT")
        run_with(spark, spec, lake, InMemoryMetadataStore(), run=1)


def test_unreachable_brokers_fail_within_the_timeout(spark: Any, lake: Path, kafka: Any) -> None:
    import time

    spec = job(kafka, ["x"], bootstrap_servers="127.0.0.1:1", timeout="3s")
    started = time.monotonic()
    with pytest.raises(JobFailedError, match=r"the Kafka brokers at 127\.0\.0\.1:1 did not answer"):
        run_with(spark, spec, lake, InMemoryMetadataStore(), run=1)
    assert time.monotonic() - started < 20, "the planner waits about `timeout`, not Kafka's default minute"


@pytest.mark.crash
@pytest.mark.parametrize("point", ["after_plan_saved", "after_step:1"])
def test_a_killed_run_then_reruns_publish_every_message_exactly_once(
    spark: Any, tmp_path: Path, kafka: Any, point: str
) -> None:
    """A driver killed (SIGKILL) once the batch plan is stored (its end offsets fixed, nothing read)
    or halfway through publishing (the Delta table committed; the error table and the watermark
    not): messages keep arriving; the rerun repairs the batch reading exactly the planned range,
    the next run reads the rest. Every message lands once in the table or the error table."""
    import yaml

    from tests.commit.harness import crash_run, run_here, watermarks

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    name = f"crash_{next(_names)}"
    kafka.create_topic(name, partitions=3)
    spec = job(kafka, [name])
    spec["sinks"] = {"lake": {"type": "delta", "path": "out"}}
    jobs.mkdir()
    (jobs / "crash.yaml").write_text(yaml.safe_dump(spec))
    produce(kafka, name, range(0, 60))
    kafka.produce(name, ["{broken"], keys=["bad"], partition=0)

    crashed = crash_run(jobs, wh, kill_at=point)
    assert crashed.returncode == -9, f"not killed at {point}: rc={crashed.returncode}\n{crashed.stderr[-3000:]}"
    produce(kafka, name, range(60, 90))  # arrives while the job is down

    code, rerun = run_here(jobs, wh)
    assert (code, rerun["status"]) == (0, "SUCCEEDED"), rerun
    if point == "after_plan_saved":  # the stored plan, not what is there now
        assert (rerun["records_read"], rerun["errors"]) == (61, 1)
    code, again = run_here(jobs, wh)
    assert (code, again["status"]) == (0, "SUCCEEDED"), again
    assert delta_ids(wh / "out") == list(range(90))
    from deltalake import DeltaTable

    errors = DeltaTable(str(wh / "_errors" / "crash")).to_pyarrow_table().to_pylist()
    assert [json.loads(e["record"])["value"] for e in errors] == ["{broken"]
    ends = [end for _, (_, end) in sorted(kafka.offsets(name).items())]
    assert watermarks(wh)[f"kafka:{name}"] == ends


def test_a_run_limit_is_shared_by_topics_least_recently_committed_first(spark: Any, lake: Path, kafka: Any) -> None:
    names = [f"shared_{next(_names)}" for _ in range(2)]
    for n, name in enumerate(names):
        kafka.create_topic(name, partitions=3)
        produce(kafka, name, range(n * 100, n * 100 + 30))
    store = InMemoryMetadataStore()
    spec = job(kafka, names, limits={"max_records": 40, "per_dataset": {"max_records": 25}})
    reads = [run_with(spark, spec, lake, store, run=r).summary()["records_read"] for r in range(1, 5)]
    assert reads == [40, 20, 0, 0]  # 25 + 15, then the 5 and 15 left
    assert delta_ids(lake / "out") == [*range(30), *range(100, 130)]


@pytest.mark.crash
def test_offsets_deleted_after_the_plan_was_stored_are_a_noted_gap_under_skip(
    spark: Any, tmp_path: Path, kafka: Any
) -> None:
    """A run killed once its plan (end offsets) is stored; retention deletes part of the planned
    range before the rerun, which reads the stored plan: what is gone is noted, the rest read once."""
    import yaml

    from tests.commit.harness import crash_run, run_here

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    name = f"late_loss_{next(_names)}"
    kafka.create_topic(name, partitions=3)
    jobs.mkdir()
    (jobs / "crash.yaml").write_text(yaml.safe_dump(job(kafka, [name], on_data_loss="skip")))
    for partition in range(3):
        kafka.produce(name, [json.dumps({"id": partition * 100 + i}) for i in range(10)], partition=partition)
    crashed = crash_run(jobs, wh, kill_at="after_plan_saved")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    kafka.delete_records(name, 2, 4)  # offsets 0..3 of partition 2, planned and not yet read

    printed: list[str] = []
    code, summary = run_here(jobs, wh, printed=printed)
    assert (code, summary["status"], summary["records_read"]) == (0, "SUCCEEDED", 26), summary
    gap = (
        "data loss (on_data_loss = skip): partition 2: offsets 0..3 "
        "(deleted after this batch was planned, 4 message(s))"
    )
    assert summary["dags"][0]["notes"] == {f"kafka:{name}": gap}
    from deltalake import DeltaTable

    statuses = DeltaTable(str(wh / "_engine" / "job_status")).to_pyarrow_table().to_pylist()
    assert [s["message"] for s in statuses if s["dataset"] == f"kafka:{name}"] == [gap]
    assert delta_ids(wh / "out") == sorted({p * 100 + i for p in range(3) for i in range(10)} - {200, 201, 202, 203})
