"""Parquet, Avro, JSON or CSV files, staged then renamed into place.

The batch is written with Spark's writer into ``<path>/_engine_staging/<batch>/`` and published by
renaming each staged file into place (:class:`~engine.commit.steps.RenameFiles`);
``mode = overwrite`` first deletes the files the path held (:class:`~engine.commit.steps.DeleteFiles`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
from engine.commit.steps import CommitStep, DeleteFiles, RenameFiles
from engine.sinks.conf import FilesSinkConf
from engine.sinks.path_sink import PathSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


class FilesSink(PathSink):
    """See :class:`~engine.sinks.conf.FilesSinkConf` for its config."""

    Conf = FilesSinkConf
    conf: FilesSinkConf

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        staging = batch.staging(c.path)
        writer = df.write.format(c.type).mode("overwrite").options(**self._options)
        if c.partition_by:
            writer = writer.partitionBy(*c.partition_by)
        writer.save(staging)
        steps: list[CommitStep] = []
        if c.mode == "overwrite":
            steps.append(DeleteFiles(self.name, c.path, [rel for rel, _ in fs.files(c.path, visible_only=True)]))
        steps.append(RenameFiles(self.name, staging, c.path, [[rel, size] for rel, size in fs.files(staging)]))
        return Staged(steps, staging)
