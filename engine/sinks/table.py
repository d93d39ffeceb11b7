"""Delta tables and Parquet/Avro/JSON/CSV files, written by Spark's own writers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.sinks.base import Sink
from engine.sinks.conf import TableSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class TableSink(Sink):
    """See :class:`~engine.sinks.conf.TableSinkConf` for its config."""

    Conf = TableSinkConf
    conf: TableSinkConf

    def check(self, df: DataFrame) -> None:
        missing = [c for c in self.conf.partition_by if c not in df.columns]
        if missing:
            raise ConfigError(
                f"sink `{self.name}` partitions by `{missing[0]}`, which branch `{self.conf.from_}` "
                f"does not have; columns: {', '.join(df.columns)}",
                key=f"{self.key}.partition_by",
            )

    def _write(self, df: DataFrame) -> None:
        c = self.conf
        writer = df.write.format(c.type).mode(c.mode).options(**{k: str(v) for k, v in c.options.items()})
        if c.partition_by:
            writer = writer.partitionBy(*c.partition_by)
        writer.save(c.path)
