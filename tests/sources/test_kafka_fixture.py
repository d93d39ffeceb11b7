"""The session Kafka broker (tests/kafka.py) is real and its helpers tell the truth: what ``produce`` writes,
``offsets`` counts and ``consume_all`` reads back, partition by partition; partitions can be added; deleting records
moves a partition's log start as retention would."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
from confluent_kafka import KafkaException

from tests.kafka import Kafka


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses (the broker lives for the whole session)."""
    return f"fixture-{uuid.uuid4().hex[:12]}"


def test_produced_messages_are_counted_and_read_back(kafka: Kafka, topic: str) -> None:
    kafka.create_topic(topic, partitions=3)
    values: list[str | None] = [f"v{i}" for i in range(300)]
    values[7] = None  # a tombstone
    keys = [f"k{i % 10}" for i in range(300)]
    headers = [[("n", str(i).encode()), ("empty", None)] if i % 100 == 0 else None for i in range(300)]

    assert kafka.produce(topic, values, keys=keys, headers=headers) == 300

    offsets = kafka.offsets(topic)
    records = kafka.consume_all(topic)
    assert sorted(offsets) == [0, 1, 2]
    assert all(start == 0 for start, _ in offsets.values())
    assert sum(end for _, end in offsets.values()) == 300
    by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, offset, _, _, _ in records:
        by_partition[partition].append(offset)
    assert {p: list(range(end)) for p, (_, end) in offsets.items() if end} == by_partition
    partition_of_key: dict[bytes | None, set[int]] = defaultdict(set)
    for partition, _, key, _, _ in records:
        partition_of_key[key].add(partition)
    assert all(len(parts) == 1 for parts in partition_of_key.values())  # one key, one partition
    assert {(key, value) for _, _, key, value, _ in records} == {
        (k.encode(), None if v is None else v.encode()) for k, v in zip(keys, values, strict=True)
    }
    for partition in by_partition:  # each partition keeps the order they were produced in
        indexes = [int(v[1:]) for p, _, _, v, _ in records if p == partition and v is not None]
        assert indexes == sorted(indexes)
    assert sorted(h for *_, h in records if h) == [[("n", str(i).encode()), ("empty", None)] for i in (0, 100, 200)]


def test_add_partitions_then_produce_to_the_new_one(kafka: Kafka, topic: str) -> None:
    kafka.create_topic(topic, partitions=3)
    kafka.add_partitions(topic, 4)

    assert kafka.produce(topic, [b"a", b"b"], partition=3) == 2

    assert kafka.offsets(topic) == {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 2)}
    assert kafka.consume_all(topic) == [(3, 0, None, b"a", []), (3, 1, None, b"b", [])]


def test_delete_records_moves_the_log_start(kafka: Kafka, topic: str) -> None:
    kafka.create_topic(topic, partitions=2, retention_ms=-1)
    kafka.produce(topic, [f"m{i}" for i in range(10)], partition=0)

    assert kafka.delete_records(topic, 0, 4) == 4

    assert kafka.offsets(topic) == {0: (4, 10), 1: (0, 0)}
    assert [(p, o, v) for p, o, _, v, _ in kafka.consume_all(topic)] == [(0, i, f"m{i}".encode()) for i in range(4, 10)]


def test_delete_topic_and_unequal_columns(kafka: Kafka, topic: str) -> None:
    kafka.create_topic(topic, partitions=1)
    with pytest.raises(ValueError, match="2 values, 1 keys"):
        kafka.produce(topic, ["a", "b"], keys=["k"])
    assert kafka.offsets(topic) == {0: (0, 0)}  # checked before anything is sent

    kafka.delete_topic(topic)

    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC"):
        kafka.offsets(topic)
