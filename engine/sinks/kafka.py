"""A Kafka topic: the branch's records as messages, staged whole, then sent (at least once, with
headers that identify each message so a repeat can be dropped).

See :class:`~engine.sinks.conf.KafkaSinkConf` for what a user sets and :mod:`engine.commit.kafka`
for the guarantee. Staging fixes each message (key, value, headers, among them ``engine.record``,
the record's number in the batch) in Parquet, so a batch sent again is the same messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.commit.batch import BatchRef, Staged
from engine.commit.delta_files import staged_schema
from engine.commit.kafka import SENT, KafkaLogin, KafkaSend, login_key
from engine.errors import ConfigError
from engine.sinks.base import Sink
from engine.sinks.conf import KafkaSinkConf

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from engine.storage.hadoop import HadoopFs

HEADERS = ("engine.job", "engine.dag", "engine.batch", "engine.record")


class KafkaSink(Sink):
    """See :class:`~engine.sinks.conf.KafkaSinkConf` for its config."""

    Conf = KafkaSinkConf
    conf: KafkaSinkConf
    counts_while_staging = True  # the messages are staged by one Parquet write of the whole branch

    @property
    def login(self) -> KafkaLogin:
        return KafkaLogin(self.conf.bootstrap_servers, self.conf.client_properties())

    def locations(self, dag: str) -> dict[str, object]:
        return {login_key(dag, self.name): self.login}

    def check(self, df: DataFrame) -> None:
        c = self.conf
        for key, names in (("key", [c.key] if c.key else []), ("value_columns", c.value_columns or [])):
            missing = [n for n in names if n not in df.columns]
            if missing:
                raise ConfigError(
                    f"sink `{self.name}`: {', '.join(missing)} not in the branch; columns: {', '.join(df.columns)}",
                    key=f"{self.key}.{key}",
                )
        try:  # the value's expression (an Avro schema read and applied) analysed, nothing run
            df.select(self._value(df)).schema  # noqa: B018
        except Exception as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"sink `{self.name}`: the value cannot be made: {why}", key=f"{self.key}.schema") from exc

    def staging(self, batch: BatchRef) -> str:
        return batch.staging(f"{self.conf.staging_dir.rstrip('/')}/{self.name}")

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        fs.delete(self.staging(batch), recursive=True)

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        staging = self.staging(batch)
        batch_id = f"{batch.app_id}:{self.name}:{batch.number}"
        place = {"engine.job": batch.job, "engine.dag": batch.dag, "engine.batch": batch_id}
        headers = F.array(
            *[F.struct(F.lit(k).alias("key"), F.lit(v).cast("binary").alias("value")) for k, v in place.items()],
            F.struct(
                F.lit("engine.record").alias("key"),
                F.monotonically_increasing_id().cast("string").cast("binary").alias("value"),
            ),
        )
        messages = df.select(self._key(df).alias("key"), self._value(df).alias("value"), headers.alias("headers"))
        messages.write.mode("overwrite").parquet(staging)
        parent = staging.rsplit("/", 1)[0]
        for path, is_dir in fs.glob(f"{parent}/*{SENT}", visible_only=False):  # earlier batches' (all published)
            if not is_dir and path.rsplit("/", 1)[-1] != staging.rsplit("/", 1)[-1] + SENT:
                fs.delete(path)
        step = KafkaSend(
            self.name,
            login_key(batch.dag, self.name),
            staging,
            self.conf.bootstrap_servers,
            self.conf.topic,
            staged_schema=staged_schema(messages),
        )
        return Staged(steps=[step], staging=staging)

    def write(self, df: DataFrame) -> None:
        writer = df.select(self._key(df).alias("key"), self._value(df).alias("value")).write.format("kafka")
        for key, value in self.login.properties.items():
            writer = writer.option(f"kafka.{key}", value)
        writer.option("topic", self.conf.topic).save()

    def _key(self, df: DataFrame) -> Column:
        return F.col(f"`{self.conf.key}`").cast("string") if self.conf.key else F.lit(None).cast("string")

    def _value(self, df: DataFrame) -> Column:
        c = self.conf
        columns = c.value_columns or list(df.columns)
        if c.format == "string":
            return F.col(f"`{columns[0]}`").cast("string")
        if c.format == "bytes":
            return F.col(f"`{columns[0]}`").cast("binary")
        record = F.struct(*[F.col(f"`{n}`") for n in columns])
        if c.format == "json":
            return F.to_json(record)
        from pyspark.sql.avro.functions import to_avro

        if c.schema_ is None:
            return to_avro(record)
        return to_avro(record, Path(c.schema_).read_text() if c.schema_.endswith(".avsc") else c.schema_)
