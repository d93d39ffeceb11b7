"""A database table over JDBC, staged into a table of its own and published in one transaction.

See :class:`~engine.sinks.conf.JdbcSinkConf` for what a user sets and
:mod:`engine.commit.jdbc` for the publishing steps. Staging is Spark's JDBC writer (parallel
partitions, ``batch_size`` rows a round trip) into ``<schema>.engine_stage_<hash of the sink's
app id and batch>``: writing it again (a batch re-staged after a crash) replaces it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.commit.batch import BatchRef, Staged
from engine.commit.jdbc import ROW_ID, Database, JdbcDropStaging, JdbcLogin, JdbcPublish, login_key, scheme
from engine.errors import ConfigError
from engine.plugins.conf import option_texts
from engine.plugins.lineage import shown_url
from engine.sinks.base import Sink
from engine.sinks.conf import JdbcSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


UPSERTS = frozenset({"postgresql", "mysql", "mariadb", "sqlserver", "oracle", "db2", "h2"})
"""Databases whose upsert SQL the publish step writes (``ON CONFLICT``, ``ON DUPLICATE KEY``, ``MERGE``)."""


class JdbcSink(Sink):
    """See :class:`~engine.sinks.conf.JdbcSinkConf` for its config."""

    Conf = JdbcSinkConf
    conf: JdbcSinkConf
    counts_while_staging = True  # Spark's JDBC writer loads the whole branch in one job

    @property
    def login(self) -> JdbcLogin:
        c = self.conf
        return JdbcLogin(c.url, c.user, c.password, c.driver, option_texts(c.options))

    def locations(self, dag: str) -> dict[str, object]:
        return {login_key(dag, self.name): self.login}

    def check(self, df: DataFrame) -> None:
        c = self.conf
        for key, names in (("keys", c.keys), ("sequence_by", [c.sequence_by] if c.sequence_by else [])):
            missing = [n for n in names if n not in df.columns]
            if missing:
                raise ConfigError(
                    f"sink `{self.name}`: {', '.join(missing)} not in the branch; columns: {', '.join(df.columns)}",
                    key=f"{self.key}.{key}",
                )
        if c.sequence_by is None:
            self.check_repeats(df)
        if c.mode == "upsert" and scheme(c.url) not in UPSERTS:
            raise ConfigError(
                f"sink `{self.name}`: mode upsert knows the SQL of {', '.join(sorted(UPSERTS))}, not `{scheme(c.url)}`",
                key=f"{self.key}.mode",
            )
        with self._database(df) as db:
            found = db.columns(c.table)
            unique = (
                db.unique_keys(c.table)
                if found is not None and c.mode == "upsert" and scheme(c.url) == "postgresql"
                else None
            )
        if unique is not None and sorted(c.keys) not in [sorted(u) for u in unique]:
            raise ConfigError(
                f"sink `{self.name}`: upsert on PostgreSQL needs a unique index (or primary key) on exactly "
                f"({', '.join(c.keys)}) of {c.table}; it has: {'; '.join(', '.join(u) for u in unique) or 'none'}",
                key=f"{self.key}.keys",
            )
        if found is None:
            raise ConfigError(
                f"sink `{self.name}`: there is no table {c.table} at {shown_url(c.url)} (its owners create it)",
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
        frame, kept = self.one_per_key(df)  # an upsert's keys: each once
        if c.partitions:
            frame = frame.repartition(c.partitions)
        frame = frame.withColumn(ROW_ID, F.monotonically_increasing_id())  # fixed by the staged frame
        writer = frame.write.format("jdbc").options(**self.login.spark_options())
        writer.option("dbtable", staging).option("batchsize", str(c.batch_size)).mode("overwrite").save()
        login = login_key(batch.dag, self.name)
        publish = JdbcPublish(
            sink=self.name,
            login=login,
            url=shown_url(c.url),
            table=c.table,
            staging=staging,
            mode=c.mode,
            columns=list(df.columns),
            keys=list(c.keys),
            app_id=app_id,
            batch=batch.number,
            control=c.control_table,
        )
        return self.counted(Staged(steps=[publish, JdbcDropStaging(self.name, login, staging)]), kept)

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        from pyspark.sql import SparkSession

        staging = self.staging_table(f"{batch.app_id}:{self.name}", batch.number)
        with Database(SparkSession.active(), self.login) as db:
            if db.columns(staging) is not None:
                db.update(f"DROP TABLE {staging}")

    def write(self, df: DataFrame) -> None:
        writer = df.write.format("jdbc").options(**self.login.spark_options()).option("dbtable", self.conf.table)
        writer.option("batchsize", str(self.conf.batch_size)).mode("append").save()

    def staging_table(self, app_id: str, batch: int) -> str:
        """``engine_stage_<hash>`` in the target's schema (a name short enough for every database)."""
        digest = hashlib.sha256(f"{app_id}:{batch}".encode()).hexdigest()[:16]
        schema = self.conf.table.rsplit(".", 1)[0] + "." if "." in self.conf.table else ""
        return f"{schema}engine_stage_{digest}"

    def _database(self, df: DataFrame) -> Database:
        return Database(df.sparkSession, self.login)
