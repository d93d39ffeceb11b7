"""Publishing into a Kafka topic: send a staged batch once it is complete, then mark it sent.

:class:`KafkaSend` reads the batch's staged messages (key, value, headers: Parquet written by the
Kafka sink) and sends them with Spark's Kafka writer, then leaves a ``_SENT`` marker in the staging
directory. ``verify()`` is that marker (or the staging directory already removed by the sequence's
later :class:`~engine.commit.steps.DeleteStaging`). A driver that dies while sending leaves no
marker: the rerun sends the whole batch again, so messages may repeat, each repeat with the same
``engine.batch`` and ``engine.record`` headers for consumers to drop. Kafka's writer in Spark is
not transactional, so this is at least once, with repeats identifiable, never silent.

The step keeps the brokers' address, never their credentials: the run hands the producer
properties of its job's Kafka sinks to the steps (:attr:`StepContext.locations`, under
:func:`login_key`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from engine.commit.delta_files import read_staged
from engine.commit.errors import StepError
from engine.commit.steps import CommitStep, StepContext

SENT = ".sent"


def login_key(dag: str, sink: str) -> str:
    """Where a run keeps the producer properties of ``sink`` of ``dag`` (two sinks never share them)."""
    return f"kafka-login:{dag}:{sink}"


@dataclass(frozen=True)
class KafkaLogin:
    """The producer properties of a Kafka sink (``bootstrap.servers`` and its ``options``)."""

    bootstrap: str
    properties: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass
class KafkaSend(CommitStep):
    kind: ClassVar[str] = "kafka_send"
    sink: str
    login: str
    """The key of the sink's producer properties in :attr:`StepContext.locations` (:func:`login_key`)."""
    staging: str
    bootstrap: str
    topic: str
    staged_schema: str = ""
    """The staged messages' schema (:func:`~engine.commit.delta_files.staged_schema`; empty: read
    from the files)."""

    @property
    def marker(self) -> str:
        """Beside the staging directory, so the sequence's DeleteStaging leaves it (the sink's next
        batch removes it): a batch is sent when this says so, never because staging is gone."""
        return f"{self.staging}{SENT}"

    def verify(self, ctx: StepContext) -> bool:
        return ctx.fs.exists(self.marker)

    def execute(self, ctx: StepContext) -> None:
        login = ctx.locations.get(self.login)
        if not isinstance(login, KafkaLogin):
            raise StepError(
                f"sink `{self.sink}`: this job has no such Kafka sink any more: the batch it staged can only be sent "
                "by a run of a job that still has that sink"
            )
        if not ctx.fs.exists(self.staging):
            raise StepError(
                f"sink `{self.sink}`: the staged batch {self.staging} is gone and was never marked sent: it was "
                "removed before it was published"
            )
        staged = read_staged(ctx.spark, self.staging, self.staged_schema)
        writer = staged.select("key", "value", "headers").write.format("kafka")
        for key, value in login.properties.items():
            writer = writer.option(f"kafka.{key}", value)
        try:
            writer.option("topic", self.topic).save()
        except Exception as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StepError(
                f"sink `{self.sink}`: sending to topic {self.topic} at {self.bootstrap} failed: {why}"
            ) from exc
        ctx.midway()  # everything sent, the batch not yet marked: a crash here sends it again
        ctx.fs.touch(self.marker)

    def describe(self) -> str:
        return f"send the staged batch to Kafka topic {self.topic} (sink `{self.sink}`)"
