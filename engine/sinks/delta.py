"""A Delta table, staged and published as one Delta commit.

A plain ``append`` or ``overwrite`` is staged by Delta's writer: its files go into the table's
directory uncommitted, and the commit sequence's :class:`~engine.commit.steps.DeltaWrite` commits
them (:mod:`engine.commit.delta_files`). Any other write (``merge``, writer options, a schema
change) is staged with Spark's Parquet writer into ``<path>/_engine_staging/<batch>/`` and
written to the table by the step. Either way the commit carries ``txnAppId``/``txnVersion``, so a
replay never writes the batch twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
from engine.commit.delta_files import write_files
from engine.commit.steps import DeltaWrite
from engine.sinks.conf import DeltaSinkConf
from engine.sinks.table import TableSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.commit.fs import HadoopFs


class DeltaSink(TableSink):
    """See :class:`~engine.sinks.conf.DeltaSinkConf` for its config."""

    Conf = DeltaSinkConf
    conf: DeltaSinkConf

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        base_version = fs.delta_version(c.path)
        written = write_files(df, c.path, list(c.partition_by), mode=c.mode, options=self._options)
        staging = None
        if written is None:
            staging = batch.staging(c.path)
            df.write.mode("overwrite").parquet(staging)
        step = DeltaWrite(
            sink=self.name,
            table=c.path,
            staging=staging or "",
            mode=c.mode,
            app_id=f"{batch.app_id}:{self.name}",
            batch=batch.number,
            base_version=base_version,
            partition_by=list(c.partition_by),
            keys=list(c.keys),
            options=self._options,
            user_metadata=batch.user_metadata,
            written=written.to_json() if written else {},
        )
        return Staged([step], staging)
