"""A Delta table, staged as Parquet and published as one Delta commit.

The batch is written with Spark's Parquet writer into ``<path>/_engine_staging/<batch>/``; the
commit sequence's :class:`~engine.commit.steps.DeltaWrite` then appends, overwrites or merges it
with ``txnAppId``/``txnVersion``, so a replay never writes it twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
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
        staging = batch.staging(c.path)
        df.write.mode("overwrite").parquet(staging)
        step = DeltaWrite(
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
        return Staged([step], staging)
