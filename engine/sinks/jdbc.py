"""A database table over JDBC, staged into a table of its own and published in one transaction.

See :class:`~engine.sinks.conf.JdbcSinkConf` for what a user sets and
:mod:`engine.commit.jdbc` for the publishing steps. Staging is Spark's JDBC writer (parallel
partitions, ``batch_size`` rows a round trip) into ``<schema>.engine_stage_<hash of the sink's
app id and batch>``: writing it again (a batch re-staged after a crash) replaces it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.commit.batch import BatchRef, Staged
from engine.commit.jdbc import Database, JdbcDropStaging, JdbcLogin, JdbcPublish
from engine.errors import ConfigError
from engine.sinks.base import Sink
from engine.sinks.conf import JdbcSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


class JdbcSink(Sink):
    """See :class:`~engine.sinks.conf.JdbcSinkConf` for its config."""

    Conf = JdbcSinkConf
    conf: JdbcSinkConf

    @property
    def login(self) -> JdbcLogin:
        c = self.conf
        options = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in c.options.items()}
        return JdbcLogin(c.url, c.user, c.password, c.driver, options)

    def locations(self) -> dict[str, object]:
        return {self.login.key: self.login}

    def check(self, df: DataFrame) -> None:
        c = self.conf
        for key, names in (("keys", c.keys), ("sequence_by", [c.sequence_by] if c.sequence_by else [])):
            missing = [n for n in names if n not in df.columns]
            if missing:
                raise ConfigError(
                    f"sink `{self.name}`: {', '.join(missing)} not in the branch; columns: {', '.join(df.columns)}",
                    key=f"{self.key}.{key}",
                )
        with self._database(df) as db:
            found = db.columns(c.table)
        if found is None:
            raise ConfigError(
                f"sink `{self.name}`: there is no table {c.table} at {c.url} (its owners create it)",
                key=f"{self.key}.table",
            )
        absent = [n for n in df.columns if n not in found]
        if absent:
            raise ConfigError(
                f"sink `{self.name}`: the table {c.table} has no column(s) {', '.join(absent)} of the branch; "
                f"it has: {', '.join(found)}",
                key=f"{self.key}.table",
            )

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        app_id = f"{batch.app_id}:{self.name}"
        staging = self.staging_table(app_id, batch.number)
        with self._database(df) as db:
            db.ensure_control(c.control_table)
        frame = self._one_per_key(df) if c.mode == "upsert" else df
        if c.partitions:
            frame = frame.repartition(c.partitions)
        writer = frame.write.format("jdbc").options(**self.login.spark_options())
        writer.option("dbtable", staging).option("batchsize", str(c.batch_size)).mode("overwrite").save()
        publish = JdbcPublish(
            sink=self.name,
            url=c.url,
            user=c.user,
            table=c.table,
            staging=staging,
            mode=c.mode,
            columns=list(df.columns),
            keys=list(c.keys),
            app_id=app_id,
            batch=batch.number,
            control=c.control_table,
        )
        return Staged(steps=[publish, JdbcDropStaging(self.name, c.url, c.user, staging)])

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        assert spark is not None
        with Database(spark, self.login) as db:
            db.update(f"DROP TABLE IF EXISTS {self.staging_table(f'{batch.app_id}:{self.name}', batch.number)}")

    def write(self, df: DataFrame) -> None:
        writer = df.write.format("jdbc").options(**self.login.spark_options()).option("dbtable", self.conf.table)
        writer.option("batchsize", str(self.conf.batch_size)).mode("append").save()

    def staging_table(self, app_id: str, batch: int) -> str:
        """``engine_stage_<hash>`` in the target's schema (a name short enough for every database)."""
        digest = hashlib.sha256(f"{app_id}:{batch}".encode()).hexdigest()[:16]
        schema = self.conf.table.rsplit(".", 1)[0] + "." if "." in self.conf.table else ""
        return f"{schema}engine_stage_{digest}"

    def _one_per_key(self, df: DataFrame) -> DataFrame:
        """One row per key: the largest ``sequence_by`` (any one without it)."""
        keys = list(self.conf.keys)
        if self.conf.sequence_by is None:
            return df.dropDuplicates(keys)
        order = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(F.col(f"`{self.conf.sequence_by}`").desc())
        return df.withColumn("__engine_nth", F.row_number().over(order)).where("__engine_nth = 1").drop("__engine_nth")

    def _database(self, df: DataFrame) -> Database:
        return Database(df.sparkSession, self.login)
