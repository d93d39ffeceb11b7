"""A real Apache Kafka broker for the tests (a pytest plugin: tests/conftest.py lists it in ``pytest_plugins``).

``scripts/kafka.sh install`` (run by scripts/test.sh, and by the fixture itself when needed) resolves the broker's
jars from Maven Central into .cache/kafka/lib. The session-scoped ``kafka`` fixture formats a throwaway single-node
KRaft cluster (one JVM that is both broker and controller) in a temporary directory, starts it on 127.0.0.1 and two
free ports, and at the end of the session stops it and removes the directory. Tests that use it are marked
``kafka``.

:class:`Kafka` carries the bootstrap address and helpers built on the ``confluent_kafka`` client (librdkafka: it
shares no code with the JVM client Spark reads through, so what the helpers write and read is an independent
witness): create, grow and delete topics, produce in bulk, truncate a partition's head as retention does, and read a
topic back whole. The broker log (``Kafka.log``) is the place to look when a test sees the broker misbehave."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic  # confluent_kafka.admin's re-export is implicit for mypy

from tests.watchdog import Watchdog, watching

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "kafka.sh"
LIBDIR = REPO / ".cache" / "kafka" / "lib"
HOST = "127.0.0.1"
TIMEOUT = 60.0
"""Seconds any helper waits for the broker (a topic's leaders, a flush, a full read) before it gives up."""

Value = str | bytes | None
"""A message key or value as the helpers take it: str (UTF-8) or bytes; None is a null (a value's tombstone)."""
Headers = Sequence[tuple[str, str | bytes | None]]
Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""One message as :meth:`Kafka.consume_all` returns it: (partition, offset, key, value, headers)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs the session-scoped Kafka broker (tests/kafka.py)")


@dataclass(frozen=True)
class Kafka:
    """The running broker: its bootstrap address, its log, and helpers that each open a short-lived client."""

    bootstrap: str
    log: Path

    def create_topic(self, name: str, partitions: int = 3, **config: str | int | bool) -> None:
        """Create ``name`` (replication factor 1) and return once every partition has a leader that answers.
        ``config`` holds topic configs with underscores for dots: ``cleanup_policy="compact"``."""
        conf = {key.replace("_", "."): str(v).lower() if isinstance(v, bool) else str(v) for key, v in config.items()}
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=conf)
        admin = self._admin()  # held: a collected client fails its pending futures
        admin.create_topics([topic], operation_timeout=TIMEOUT)[name].result()
        self._wait_partitions(name, partitions)

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions and return once the new ones have leaders that answer."""
        admin = self._admin()
        admin.create_partitions([NewPartitions(topic, total)], operation_timeout=TIMEOUT)[topic].result()
        self._wait_partitions(topic, total)

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and return once the broker's metadata no longer lists it."""
        admin = self._admin()
        admin.delete_topics([name], operation_timeout=TIMEOUT)[name].result()
        deadline = time.monotonic() + TIMEOUT
        while name in admin.list_topics(timeout=TIMEOUT).topics:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} still listed {TIMEOUT}s after its deletion")
            time.sleep(0.05)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Drop the records of one partition below ``before_offset``, as retention does: the partition's log start
        offset moves there (the offsets of the remaining records do not change). Returns the new log start."""
        target = TopicPartition(topic, partition, before_offset)
        admin = self._admin()
        low: int = next(iter(admin.delete_records([target], operation_timeout=TIMEOUT).values())).result().low_watermark
        return low

    def produce(
        self,
        topic: str,
        values: Iterable[Value],
        *,
        keys: Iterable[Value] | None = None,
        partition: int | None = None,
        headers: Iterable[Headers | None] | None = None,
    ) -> int:
        """Write one message per value, in order (one request in flight at a time: a retried batch cannot overtake
        the next), and return once the broker has acknowledged all; returns how many. ``keys`` and ``headers`` (one
        list per message) run alongside ``values`` and must be as long; ``partition`` sends them all to that
        partition, otherwise the client's partitioner picks (by key hash, or at random for null keys)."""
        rows = _rows(values, keys, headers)
        failed: list[str] = []

        def on_failure(err: KafkaError | None, msg: Message) -> None:  # called for failed messages only
            failed.append(f"partition {msg.partition()}: {err}")

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                # Idempotence would rule out duplicates too, but its producer id costs each new client ~0.5 s.
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 1,
                "acks": "all",
                "linger.ms": 20,
                "batch.num.messages": 100_000,
                "queue.buffering.max.messages": 1_000_000,
                "delivery.report.only.error": True,
                "on_delivery": on_failure,
            }
        )
        send, poll, part, n = producer.produce, producer.poll, -1 if partition is None else partition, 0
        for n, (value, key, hdrs) in enumerate(rows, 1):
            while True:
                try:
                    send(topic, value, key, part, headers=None if hdrs is None else list(hdrs))
                    break
                except BufferError:  # the local queue is full: let the client send some
                    poll(0.05)
            if n % 10_000 == 0:
                poll(0)
        if remaining := producer.flush(TIMEOUT):
            raise TimeoutError(f"{remaining} of {n} messages to {topic!r} not acknowledged after {TIMEOUT}s")
        if failed:
            raise KafkaException(f"{len(failed)} of {n} messages to {topic!r} failed; the first: {failed[0]}")
        return n

    def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """Partition -> (log start offset, end offset) of ``topic``, as the broker has them now. The end is the last
        stable offset (librdkafka's consumers read committed): the high watermark unless a transaction is open."""
        with self._consumer() as consumer:
            return self._watermarks(consumer, topic)

    def consume_all(self, topic: str) -> list[Record]:
        """Every message of ``topic`` from each partition's log start up to its end offset at the time of the call,
        sorted by (partition, offset). A fresh consumer with no group membership or commits: reads change nothing."""
        records: list[Record] = []
        with self._consumer() as consumer:
            marks = self._watermarks(consumer, topic)
            ends = {p: end for p, (start, end) in marks.items() if end > start}
            consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in ends])
            deadline = time.monotonic() + TIMEOUT
            while ends:
                batch = consumer.consume(10_000, timeout=0.05)  # returns at 10,000 messages or the timeout
                for msg in batch:
                    if (err := msg.error()) is not None:
                        raise KafkaException(err)
                    p, offset = msg.partition(), msg.offset()
                    if p is None or offset is None or offset >= ends.get(p, -1):
                        continue  # produced after the call began
                    hdrs = cast("list[tuple[str, bytes | None]]", msg.headers() or [])  # a consumer's are a list
                    records.append((p, offset, msg.key(), msg.value(), hdrs))
                    if offset + 1 >= ends[p]:
                        del ends[p]
                if not batch and ends:  # transaction markers take offsets and are never delivered
                    for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                        if tp.offset >= ends[tp.partition]:
                            del ends[tp.partition]
                if ends and time.monotonic() > deadline:
                    raise TimeoutError(f"consuming {topic!r}: partitions {sorted(ends)} not read to the end")
        return sorted(records, key=lambda r: (r[0], r[1]))

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"tests-kafka-{uuid.uuid4().hex}",  # required, but never joined: assign() only
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": 50,
                # Large fetches: reading a few million small messages back takes half as long.
                "fetch.max.bytes": 100_000_000,
                "max.partition.fetch.bytes": 10_000_000,
                "queued.max.messages.kbytes": 1_000_000,
            }
        )

    def _watermarks(self, consumer: Consumer, topic: str) -> dict[int, tuple[int, int]]:
        meta = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic]
        if meta.error is not None:
            raise KafkaException(meta.error)
        marks: dict[int, tuple[int, int]] = {}
        for p in sorted(meta.partitions):
            mark = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT, cached=False)
            if mark is None:
                raise TimeoutError(f"no offsets for partition {p} of {topic!r} after {TIMEOUT}s")
            marks[p] = (mark[0], mark[1])
        return marks

    def _wait_partitions(self, topic: str, count: int) -> None:
        """Until the metadata shows ``count`` partitions with leaders and each answers an offsets request (the
        metadata can name a leader a moment before its log exists)."""
        deadline = time.monotonic() + TIMEOUT
        with self._consumer() as consumer:
            while True:
                try:
                    meta = consumer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
                    parts = {} if meta is None or meta.error is not None else meta.partitions
                    if len(parts) == count and all(p.leader >= 0 for p in parts.values()):
                        self._watermarks(consumer, topic)
                        return
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {topic!r}: {count} partitions with leaders not seen after {TIMEOUT}s")
                time.sleep(0.05)


def _rows(
    values: Iterable[Value], keys: Iterable[Value] | None, headers: Iterable[Headers | None] | None
) -> Iterator[tuple[Value, Value, Headers | None]]:
    """(value, key, headers) per message. Columns that differ in length raise ValueError: before the first message
    when they are sized, else (zip(strict=True)) when the shortest runs out."""
    sized: dict[str, int] = {}
    for name, column in (("values", values), ("keys", keys), ("headers", headers)):
        if isinstance(column, Sized):
            sized[name] = len(column)
    if len(set(sized.values())) > 1:
        raise ValueError("unequal columns: " + ", ".join(f"{n} {name}" for name, n in sized.items()))
    if keys is None and headers is None:
        return ((v, None, None) for v in values)
    if headers is None:
        return ((v, k, None) for v, k in zip(values, keys or (), strict=True))
    if keys is None:
        return ((v, None, h) for v, h in zip(values, headers, strict=True))
    return zip(values, keys, headers, strict=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home, "bin", "java"), os.X_OK):
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if found is None:
        pytest.fail("no java (neither $JAVA_HOME/bin/java nor on PATH): the Kafka broker needs Java 17+", pytrace=False)
    return found


def _libdir() -> Path:
    """.cache/kafka/lib, installed first when missing or stale (a no-op costing milliseconds otherwise)."""
    done = subprocess.run(["bash", str(SCRIPT), "install"], capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        pytest.fail(
            f"no Kafka broker jars:\n{done.stderr.strip()}\nrun 'bash scripts/kafka.sh install' (scripts/test.sh does)",
            pytrace=False,
        )
    return LIBDIR


def _cluster_id() -> str:
    """A random id in Kafka's own form (URL-safe base64 of 16 bytes), never starting with '-' (read as an option)."""
    while (text := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return text


LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


class _Broker:
    """One KRaft node (broker and controller) in ``base``: its config, its storage, its JVM."""

    def __init__(self, java: str, libdir: Path, base: Path) -> None:
        self.java = java
        self.classpath = f"{libdir}/*"
        self.base = base
        self.config = base / "server.properties"
        self.logs = base / "logs"
        self.log = base / "server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: Watchdog | None = None
        (base / "log4j2.properties").write_text(LOG4J2)

    def jvm(self, *args: str) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={self.base / 'log4j2.properties'}"
        # The client JIT only and the serial collector: a test broker starts in about half the time (on two
        # cores, C2 compiler threads and G1's would compete with the broker's start-up and with Spark's JVM).
        quick = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
        temp = f"-Djava.io.tmpdir={self.base}"  # its native libraries' copies go with the broker's folder
        return [self.java, *quick, "-Djava.awt.headless=true", temp, log4j, "-cp", self.classpath, *args]

    def configure(self, port: int, controller_port: int) -> None:
        self.port = port
        self.config.write_text(
            "# tests/kafka.py: one node, loopback only, replication factor 1 everywhere, topics made explicitly\n"
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.voters=1@{HOST}:{controller_port}\n"
            f"listeners=PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}\n"
            f"advertised.listeners=PLAINTEXT://{HOST}:{port}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            f"log.dirs={self.logs}\n"
            "num.partitions=3\n"
            "offsets.topic.replication.factor=1\n"
            "offsets.topic.num.partitions=1\n"  # created on a group's first commit: 50 partitions cost seconds
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.num.partitions=1\n"
            "transaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "auto.create.topics.enable=false\n"
            "delete.topic.enable=true\n"
        )

    def format(self) -> None:
        shutil.rmtree(self.logs, ignore_errors=True)
        cmd = self.jvm("-Xmx256m", "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(self.config))
        done = subprocess.run(cmd, cwd=self.base, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")

    def start(self, attempts: int = 3) -> str:
        """Configure, format and start on free ports (others if one was taken meanwhile); the bootstrap address
        once the broker serves metadata."""
        for attempt in range(1, attempts + 1):
            self.configure(_free_port(), _free_port())
            self.format()
            with self.log.open("wb") as out:
                cmd = self.jvm("-Xms256m", "-Xmx512m", "kafka.Kafka", str(self.config))
                self.proc = subprocess.Popen(cmd, cwd=self.base, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
            if self.watchdog is not None:
                self.watchdog.track(self.proc.pid)
            try:
                return self.wait_ready()
            except RuntimeError:
                self.stop()
                if "Address already in use" not in self.tail() or attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def wait_ready(self) -> str:
        bootstrap = f"{HOST}:{self.port}"
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.proc.returncode}) while starting:\n{self.tail()}")
            if self._listening():  # before that, the client would log every refused connection
                try:
                    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
                    if 1 in meta.brokers:  # registered and unfenced
                        return bootstrap
                except KafkaException:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Kafka broker on {bootstrap} not ready after {TIMEOUT}s:\n{self.tail()}")
            time.sleep(0.1)

    def _listening(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1):
                return True
        except OSError:
            return False

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL if it takes too long; returns once the JVM is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def running_kafka() -> Iterator[Kafka]:
    """A single-node Kafka cluster with no topics, stopped and removed on exit (the fixture's, and
    the benchmarks')."""
    broker = _Broker(_java(), _libdir(), Path(tempfile.mkdtemp(prefix="engine-kafka-")))
    with watching(broker.base / "watchdog.pids", remove=broker.base) as broker.watchdog:
        try:
            yield Kafka(bootstrap=broker.start(), log=broker.log)
        finally:
            try:
                broker.stop()
            finally:
                shutil.rmtree(broker.base, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka() -> Iterator[Kafka]:
    """A single-node Kafka cluster for the whole run, with no topics; gone after the session."""
    with running_kafka() as running:
        yield running
