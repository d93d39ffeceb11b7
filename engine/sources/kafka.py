"""Kafka topics read in batches, one dataset a topic, its watermark the next offset of each partition.

Planning asks the brokers, through Kafka's own Java client in the driver (the one Spark's
connector ships, so every ``options`` property means the same to both), for each partition's first
and end offsets. The work unit of a topic reads ``[start, end)`` of each partition, where ``start``
is the stored watermark (a new partition: its first offset; a new topic: ``starting_offsets``) and
``end`` the end offset now, lowered by ``limits.max_records`` split fairly across the partitions.
Both are in the unit's payload, which the engine stores in the batch plan before anything is read:
a retry of the batch reads exactly the same records, however many arrived since.

Gone data is found at planning, by offsets: a watermark below a partition's first offset (retention
deleted what was not read yet), above its end (the topic was deleted and re-created, or truncated),
a partition that is no longer there, or a topic that is gone. ``on_data_loss = fail`` stops the DAG
with every such gap named; ``skip`` reads on from the first offset still there and notes each gap
(partition, from, to, count) on the dataset's status. A topic re-created and refilled past the old
offsets cannot be told apart by offsets alone (Kafka's topic ids could; not kept yet).

Reading is one Spark batch read (``assign`` with explicit start and end offsets) per group of
topics. A value that does not parse keeps its raw text, with where it came from, in
:data:`~engine.sources.base.CORRUPT_RECORD` (a JSON object: topic, partition, offset, timestamp,
key, value; an Avro value base64), so it reaches the error table from step ``read``.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from engine.columns import DATASET
from engine.errors import ConfigError, JobFailedError
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, PlanContext, Source
from engine.sources.conf import KafkaSourceConf
from engine.sources.record_errors import corrupt_reason
from engine.sources.workunits import Size, WorkUnit
from engine.state.watermarks import MultiLongWatermark

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PREFIX = "kafka:"
"""A topic's dataset URN is ``kafka:<topic>``."""
METADATA = (
    ("kafka_key", "key"),
    ("kafka_topic", "topic"),
    ("kafka_partition", "partition"),
    ("kafka_offset", "offset"),
    ("kafka_timestamp", "timestamp"),
    ("kafka_headers", "headers"),
)
"""The columns every record carries: (name, the column of Spark's Kafka reader)."""


@dataclass(frozen=True)
class Offsets:
    """What one topic's work unit reads: of each partition (by number), ``[start, end)``."""

    topic: str
    start: tuple[int, ...]
    end: tuple[int, ...]

    @property
    def records(self) -> int:
        return sum(e - s for s, e in zip(self.start, self.end, strict=True))


@dataclass(frozen=True)
class Gap:
    """Offsets of one partition that are gone: ``[start, end)``; ``end`` ``None`` when unknown."""

    partition: int
    start: int
    end: int | None
    why: str

    def describe(self) -> str:
        span = f"offsets {self.start}..{self.end - 1}" if self.end is not None else f"offsets from {self.start}"
        count = f", {self.end - self.start} message(s)" if self.end is not None else ""
        return f"partition {self.partition}: {span} ({self.why}{count})"


class KafkaSource(Source):
    """See :class:`~engine.sources.conf.KafkaSourceConf` for its config."""

    Conf = KafkaSourceConf
    conf: KafkaSourceConf

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        self._value_fields(spark)  # the schema parses and leaves the kafka_* names free

    # -- planning ---------------------------------------------------------------------------------

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        with Brokers(spark, self.conf.client_properties(), float(self.conf.timeout)) as brokers:
            topics = self._topics(brokers, ctx)
            bounds = {t: brokers.bounds(t, n) for t, n in topics.items() if n is not None}
        run_left = ctx.per_run.max_records
        units = []
        for i, topic in enumerate(sorted(topics, key=lambda t: ctx.rank(PREFIX + t))):
            limit = ctx.per_dataset.tighter(ctx.per_run).max_records
            if run_left is not None:
                limit = run_left if limit is None else min(limit, run_left)
                if limit == 0 and i == 0 and ctx.guarantee:
                    limit = 1
            unit = self._unit(ctx, topic, bounds.get(topic), limit)
            units.append(unit)
            if run_left is not None and not unit.empty:
                run_left = max(0, run_left - (unit.size.records or 0))
        return units

    def _topics(self, brokers: Brokers, ctx: PlanContext) -> dict[str, int | None]:
        """Each topic to plan with its partition count (``None``: it is gone). A pattern's topics
        are those matching it now and those it read before (so a deleted one is noticed)."""
        if self.conf.topics is not None:
            found = {t: brokers.partitions(t) for t in dict.fromkeys(self.conf.topics)}
            missing = [t for t, n in found.items() if n is None and ctx.low(PREFIX + t) is None]
            if missing:
                raise ConfigError(
                    f"topic(s) {', '.join(missing)} do not exist at {self.conf.bootstrap_servers}",
                    key=f"{self.key}.topics",
                )
            return found
        assert self.conf.pattern is not None
        regex = re.compile(self.conf.pattern)
        existing = brokers.topics()
        found = {t: n for t, n in existing.items() if not t.startswith("__") and regex.fullmatch(t)}
        for dataset, state in ctx.state.items():  # read before and gone since (a reset one is forgotten)
            topic = dataset.removeprefix(PREFIX)
            gone = topic not in existing and state.watermark is not None
            if dataset.startswith(PREFIX) and regex.fullmatch(topic) and gone:
                found[topic] = None
        return found

    def _unit(self, ctx: PlanContext, topic: str, bounds: list[tuple[int, int]] | None, limit: int | None) -> WorkUnit:
        dataset = PREFIX + topic
        low = ctx.low(dataset)
        if low is not None and not isinstance(low, MultiLongWatermark):
            raise ConfigError(
                f"dataset {dataset} has a {low.kind} watermark, not per-partition offsets (multi_long)", key=self.key
            )
        if bounds is None:  # the topic is gone: nothing to read, the watermark kept
            gap = f"the topic {topic} no longer exists (deleted?); its watermark {low.display() if low else ''} is kept"
            self._lost(topic, [gap])
            return WorkUnit.carry(dataset, low, f"data loss (on_data_loss = skip): {gap}")
        start, gaps = self._starts(low, bounds)
        if gaps:
            self._lost(topic, [g.describe() for g in gaps])
        available = [max(0, end - s) for s, (_, end) in zip(start, bounds, strict=True)]
        taken = split_fairly(available, limit) if limit is not None else available
        offsets = Offsets(topic, tuple(start), tuple(s + n for s, n in zip(start, taken, strict=True)))
        high = MultiLongWatermark(offsets.end)
        notes = []
        if gaps:
            notes.append("data loss (on_data_loss = skip): " + "; ".join(g.describe() for g in gaps))
        if sum(taken) < sum(available):
            notes.append(f"throttled to {sum(taken)} of {sum(available)} messages")
        if high == low and not gaps:
            return WorkUnit.carry(dataset, low, "; ".join(notes) or "no new messages")
        size = Size(records=offsets.records)
        return WorkUnit(dataset, low, high, size=size, payload=offsets, note="; ".join(notes))

    def _starts(self, low: MultiLongWatermark | None, bounds: list[tuple[int, int]]) -> tuple[list[int], list[Gap]]:
        """Where each partition's read starts, and the gaps (offsets that are gone) before it."""
        if low is None:
            pick = 0 if self.conf.starting_offsets == "earliest" else 1
            return [b[pick] for b in bounds], []
        start, gaps = [], []
        for p, (first, end) in enumerate(bounds):
            if p >= len(low.values):  # a partition added since the last run
                start.append(first)
                continue
            mark = low.values[p]
            if mark < first:
                gaps.append(Gap(p, mark, first, "deleted before it was read: retention or deleteRecords"))
                start.append(first)
            elif mark > end:
                gaps.append(Gap(p, mark, None, f"the partition ends at {end}, below the watermark: re-created?"))
                start.append(first)
            else:
                start.append(mark)
        for p in range(len(bounds), len(low.values)):
            gaps.append(Gap(p, low.values[p], None, f"the partition is gone: the topic has {len(bounds)} now"))
        return start, gaps

    def _lost(self, topic: str, what: list[str]) -> None:
        if self.conf.on_data_loss == "fail":
            raise JobFailedError(
                f"data loss in Kafka topic {topic}: " + "; ".join(what) + ". Nothing was read. To read on from "
                f"what is there, set {self.key}.on_data_loss = skip (the gap is noted in the status), or move "
                f"the watermark with mode=checkpoint checkpoint.dataset={PREFIX}{topic}"
            )

    # -- the schema and the read --------------------------------------------------------------------

    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        """The value's fields (``_corrupt_record`` after them for ``json``/``avro``), then the
        ``kafka_*`` columns: fixed by the config, no broker asked."""
        return self._frame(spark.createDataFrame([], _READER_SCHEMA)).drop(DATASET, CORRUPT_REASON).schema

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        reading = [u for u in units if not u.empty]
        offsets: list[Offsets] = [u.payload for u in reading]
        if self.conf.on_data_loss == "skip":  # a stored plan re-read later: what was deleted since is a gap too
            offsets = self._still_there(spark, reading)
        reader = spark.read.format("kafka")
        for key, value in self.conf.client_properties().items():
            reader = reader.option(f"kafka.{key}", value)
        reader = (
            reader.option("assign", json.dumps({o.topic: list(range(len(o.start))) for o in offsets}))
            .option("startingOffsets", json.dumps({o.topic: _by_partition(o.start) for o in offsets}))
            .option("endingOffsets", json.dumps({o.topic: _by_partition(o.end) for o in offsets}))
            .option("includeHeaders", "true")
            .option("failOnDataLoss", "true" if self.conf.on_data_loss == "fail" else "false")
        )
        if self.conf.min_partitions:
            reader = reader.option("minPartitions", str(self.conf.min_partitions))
        return self._frame(reader.load())

    def _still_there(self, spark: SparkSession, units: list[WorkUnit]) -> list[Offsets]:
        """Each unit's offsets from the first still in Kafka; what is gone since planning is noted."""
        out = []
        with Brokers(spark, self.conf.client_properties(), float(self.conf.timeout)) as brokers:
            for unit in units:
                planned: Offsets = unit.payload
                count = brokers.partitions(planned.topic) or 0
                firsts = [b[0] for b in brokers.bounds(planned.topic, min(count, len(planned.start)))]
                firsts += [e for e in planned.end[len(firsts) :]]  # a partition gone: nothing to read there
                start = tuple(min(max(s, f), e) for s, f, e in zip(planned.start, firsts, planned.end, strict=True))
                gaps = [
                    Gap(p, s, n, "deleted after this batch was planned")
                    for p, (s, n) in enumerate(zip(planned.start, start, strict=True))
                    if n > s
                ]
                if gaps:
                    note = "data loss (on_data_loss = skip): " + "; ".join(g.describe() for g in gaps)
                    unit.note = "; ".join(n for n in (unit.note, note) if n)
                out.append(Offsets(planned.topic, start, planned.end))
        return out

    def read_hint(self, error: BaseException) -> str:
        text = str(error)
        if "OffsetOutOfRange" in text or "data loss" in text.lower() or "Cannot fetch offset" in text:
            return (
                "The offsets this batch fixed when it was planned are no longer in Kafka (deleted after "
                "planning): set on_data_loss = skip to read what is left, or move the watermark with mode=checkpoint"
            )
        return ""

    def _frame(self, raw: DataFrame) -> DataFrame:
        """Spark's Kafka rows (``key, value, topic, partition, offset, timestamp, headers``) as this
        source's records, with the dataset and, for a value that does not parse, the raw record
        and the reason."""
        key = F.col("key").cast("string") if self.conf.key_format == "string" else F.col("key")
        meta = [(key if src == "key" else F.col(src)).alias(name) for name, src in METADATA]
        dataset = F.concat(F.lit(PREFIX), F.col("topic")).alias(DATASET)
        fmt = self.conf.format
        if fmt in ("string", "bytes"):
            value = F.col("value").cast("string") if fmt == "string" else F.col("value")
            return raw.select(value.alias("value"), *meta, dataset)
        fields = self._value_fields(raw.sparkSession)
        if fmt == "json":
            text = F.col("value").cast("string")
            parsed = F.from_json(
                text,
                StructType([*fields, StructField(CORRUPT_RECORD, StringType())]),
                {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD},
            )
            rows = raw.select(parsed.alias("v"), text.alias("_text"), *meta, dataset)
            data = [F.col(f"v.`{f.name}`").alias(f.name) for f in fields]
            corrupt = F.col(f"v.`{CORRUPT_RECORD}`")
            reason_schema = StructType([*fields, StructField(CORRUPT_RECORD, StringType())])
            typed = rows.select(*data, corrupt.alias(CORRUPT_RECORD), "_text", *METADATA_NAMES, DATASET)
            reason = corrupt_reason("json", reason_schema, CORRUPT_RECORD, {})
            return typed.select(
                *[f.name for f in fields],
                F.when(F.col(CORRUPT_RECORD).isNotNull(), _where(F.col("_text"))).alias(CORRUPT_RECORD),
                *METADATA_NAMES,
                DATASET,
                reason.alias(CORRUPT_REASON),
            )
        return self._avro(raw, fields, meta, dataset)

    def _avro(self, raw: DataFrame, fields: list[StructField], meta: list[Column], dataset: Column) -> DataFrame:
        from pyspark.sql.avro.functions import from_avro

        value = F.col("value")
        framed = F.lit(True)
        if self.conf.confluent_wire:  # magic byte 0, a 4-byte schema id, then the Avro datum
            framed = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))
            value = F.expr("substring(value, 6)")
        decoded = from_avro(value, self._avro_json(), {"mode": "PERMISSIVE"})
        rows = raw.select(F.when(framed, decoded).alias("v"), framed.alias("_framed"), *meta, dataset, "value")
        # PERMISSIVE gives a row of nulls for a value that does not decode: a field Avro cannot
        # leave null (not a union with null) that is null says so; with none, every field null does.
        required = [F.col(f"v.`{f.name}`").isNull() for f in fields if not f.nullable]
        everything = [F.col(f"v.`{f.name}`").isNull() for f in fields]
        nulls = _any(required) if required else _all(everything) if everything else F.lit(False)
        undecoded = F.col("v").isNull() | nulls
        bad = F.col("value").isNotNull() & undecoded
        why = F.when(
            ~F.col("_framed"), F.lit("the value has no Confluent wire header (magic byte 0 and a schema id)")
        ).otherwise(F.lit("the value does not decode as Avro with the schema"))
        return rows.select(
            *[F.col(f"v.`{f.name}`").alias(f.name) for f in fields],
            F.when(bad, _where(F.base64("value"))).alias(CORRUPT_RECORD),
            *METADATA_NAMES,
            DATASET,
            F.when(bad, why).alias(CORRUPT_REASON),
        )

    def _avro_json(self) -> str:
        from engine.sources.avro_schema import load_avro_schema

        return json.dumps(load_avro_schema(self.conf.avro_source()))

    _fields: list[StructField] | None = None

    def _value_fields(self, spark: SparkSession) -> list[StructField]:
        """The value's fields (none for ``string``/``bytes``); an Avro schema's as Spark's Avro
        reader decodes it. A field named like a ``kafka_*`` column is refused."""
        if self.conf.format not in ("json", "avro"):
            return []
        if self._fields is None:
            if self.conf.format == "avro":
                from pyspark.sql.avro.functions import from_avro

                probe = spark.range(0).select(from_avro(F.lit(b""), self._avro_json()).alias("v"))
                struct = probe.schema["v"].dataType
                if not isinstance(struct, StructType):
                    raise ConfigError("the Avro schema is not a record", key=f"{self.key}.schema")
                fields = list(struct.fields)
            else:
                declared = self.declared_schema()
                assert declared is not None
                fields = list(declared.fields)
            clash = sorted({f.name for f in fields} & {*METADATA_NAMES, CORRUPT_RECORD, DATASET})
            if clash:
                raise ConfigError(
                    f"the value's schema has field(s) {', '.join(clash)}, which name the columns the source adds",
                    key=f"{self.key}.schema",
                )
            self._fields = fields
        return self._fields


class Brokers:
    """Kafka's Java consumer, in the driver JVM, for metadata and offsets only (it reads no record
    and joins no group). Every call waits at most ``timeout`` seconds; one that does not answer is
    a :class:`JobFailedError` naming the brokers."""

    def __init__(self, spark: SparkSession, props: dict[str, str], timeout: float) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._servers = props["bootstrap.servers"]
        self._timeout = jvm.java.time.Duration.ofMillis(int(timeout * 1000))
        java_props = jvm.java.util.Properties()
        bytes_in = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
        fixed = {
            "key.deserializer": bytes_in,
            "value.deserializer": bytes_in,
            "enable.auto.commit": "false",
            "allow.auto.create.topics": "false",  # asking about a topic must never create it
            "default.api.timeout.ms": str(int(timeout * 1000)),
            "client.id": "engine-planner",
        }
        for key, value in {**props, **fixed}.items():
            java_props.setProperty(key, value)
        self._consumer = self._call(lambda: jvm.org.apache.kafka.clients.consumer.KafkaConsumer(java_props))

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._consumer.close()

    def topics(self) -> dict[str, int]:
        listed = self._call(lambda: self._consumer.listTopics(self._timeout))
        return {str(name): len(listed.get(name)) for name in listed.keySet()}

    def partitions(self, topic: str) -> int | None:
        found = self._call(lambda: self._consumer.partitionsFor(topic, self._timeout))
        return len(found) if found is not None and len(found) else None

    def bounds(self, topic: str, count: int) -> list[tuple[int, int]]:
        """Each partition's (first offset, end offset)."""
        parts = [self._jvm.org.apache.kafka.common.TopicPartition(topic, p) for p in range(count)]
        listed = self._jvm.java.util.ArrayList()
        for tp in parts:
            listed.add(tp)
        first = self._call(lambda: self._consumer.beginningOffsets(listed, self._timeout))
        end = self._call(lambda: self._consumer.endOffsets(listed, self._timeout))
        return [(int(first.get(tp)), int(end.get(tp))) for tp in parts]

    def _call(self, fn: Any) -> Any:
        from py4j.protocol import Py4JJavaError

        try:
            return fn()
        except Py4JJavaError as exc:
            java = exc.java_exception
            why = f"{java.getClass().getSimpleName()}: {java.getMessage()}"
            raise JobFailedError(f"the Kafka brokers at {self._servers} did not answer: {why}") from exc


def split_fairly(available: list[int], limit: int) -> list[int]:
    """How many of ``available`` messages to take from each partition, ``limit`` in all: an even
    share each (within one), what a short partition leaves over going to the others."""
    taken = [0] * len(available)
    left = limit
    by_size = sorted(range(len(available)), key=lambda p: (available[p], p))
    for i, p in enumerate(by_size):  # the shortest first: what it cannot take goes to the rest
        taken[p] = min(available[p], left // (len(by_size) - i))
        left -= taken[p]
    return taken


def _any(conditions: list[Column]) -> Column:
    return functools.reduce(operator.or_, conditions)


def _all(conditions: list[Column]) -> Column:
    return functools.reduce(operator.and_, conditions)


def _by_partition(offsets: tuple[int, ...]) -> dict[str, int]:
    return {str(p): o for p, o in enumerate(offsets)}


def _where(value: Column) -> Column:
    """A malformed record as the error table keeps it: where it came from and its raw value."""
    return F.to_json(
        F.struct(
            F.col("kafka_topic").alias("topic"),
            F.col("kafka_partition").alias("partition"),
            F.col("kafka_offset").alias("offset"),
            F.col("kafka_timestamp").cast("string").alias("timestamp"),
            F.col("kafka_key").cast("string").alias("key"),
            value.alias("value"),
        ),
        {"ignoreNullFields": "false"},
    )


METADATA_NAMES = tuple(name for name, _ in METADATA)
_READER_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
