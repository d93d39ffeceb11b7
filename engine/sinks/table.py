"""Delta tables and Parquet/Avro/JSON/CSV files, staged then published by commit steps.

A file sink writes the batch with Spark's writer into ``<path>/_engine_staging/<batch>/`` and
publishes it by renaming each staged file into place (:class:`~engine.commit.steps.RenameFiles`;
``mode = overwrite`` first deletes the files the path held). A Delta sink stages the batch as
Parquet there and publishes it as one Delta commit with ``txnAppId``/``txnVersion``
(:class:`~engine.commit.steps.DeltaWrite`), so a replay never writes it twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
from engine.commit.steps import CommitStep, DeleteFiles, DeltaWrite, RenameFiles
from engine.errors import ConfigError
from engine.sinks.base import Sink
from engine.sinks.conf import TableSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.commit.fs import HadoopFs


class TableSink(Sink):
    """See :class:`~engine.sinks.conf.TableSinkConf` for its config."""

    Conf = TableSinkConf
    conf: TableSinkConf

    def check(self, df: DataFrame) -> None:
        for field, names in (("partition_by", self.conf.partition_by), ("keys", self.conf.keys)):
            missing = [c for c in names if c not in df.columns]
            if missing:
                raise ConfigError(
                    f"sink `{self.name}` {'partitions' if field == 'partition_by' else 'merges'} by `{missing[0]}`, "
                    f"which branch `{self.conf.from_}` does not have; columns: {', '.join(df.columns)}",
                    key=f"{self.key}.{field}",
                )

    @property
    def _options(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.conf.options.items()}

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        staging = batch.staging(c.path)
        steps: list[CommitStep] = []
        if c.type == "delta":
            df.write.mode("overwrite").parquet(staging)
            steps.append(
                DeltaWrite(
                    sink=self.name,
                    table=c.path,
                    staging=staging,
                    mode=c.mode,
                    app_id=f"{batch.app_id}:{self.name}",
                    batch=batch.number,
                    base_version=fs.delta_version(c.path),
                    partition_by=list(c.partition_by),
                    keys=list(c.keys),
                    options=self._options,
                    user_metadata=batch.user_metadata,
                )
            )
            return Staged(steps, staging)
        writer = df.write.format(c.type).mode("overwrite").options(**self._options)
        if c.partition_by:
            writer = writer.partitionBy(*c.partition_by)
        writer.save(staging)
        if c.mode == "overwrite":
            steps.append(DeleteFiles(self.name, c.path, [rel for rel, _ in fs.files(c.path, visible_only=True)]))
        steps.append(RenameFiles(self.name, staging, c.path, [[rel, size] for rel, size in fs.files(staging)]))
        return Staged(steps, staging)

    def write(self, df: DataFrame) -> None:
        c = self.conf
        writer = df.write.format(c.type).mode("overwrite" if c.mode == "overwrite" else "append")
        writer = writer.options(**self._options)
        if c.partition_by:
            writer = writer.partitionBy(*c.partition_by)
        writer.save(c.path)
