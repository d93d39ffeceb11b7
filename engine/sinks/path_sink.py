"""What the Delta and the file sinks share: checking the branch against the config, and writing
straight to the path outside the publish protocol. Each stages its own way
(:mod:`engine.sinks.delta`, :mod:`engine.sinks.files`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.sinks.base import Sink
from engine.sinks.conf import TableSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.commit.batch import BatchRef
    from engine.storage.hadoop import HadoopFs


class PathSink(Sink):
    """A sink writing a path with Spark's writer (see :class:`~engine.sinks.conf.TableSinkConf`)."""

    conf: TableSinkConf
    counts_while_staging = True  # Spark's writer, or Delta's, writes the whole branch in one job

    def check(self, df: DataFrame) -> None:
        for field, names in (("partition_by", self.conf.partition_by), ("keys", self.conf.keys)):
            missing = [c for c in names if c not in df.columns]
            if missing:
                raise ConfigError(
                    f"sink `{self.name}` {'partitions' if field == 'partition_by' else 'merges'} by `{missing[0]}`, "
                    f"which branch `{self.conf.from_}` does not have; columns: {', '.join(df.columns)}",
                    key=f"{self.key}.{field}",
                )
        from engine.sinks.repeats import comparable

        kinds = {f.name: f.dataType for f in df.schema.fields}
        odd = [k for k in self.conf.keys if not comparable(kinds[k])]
        if odd:
            raise ConfigError(
                f"sink `{self.name}` merges by `{odd[0]}`, which is {kinds[odd[0]].simpleString()}: a map or a variant "
                "cannot identify a row; use columns of other types as `keys`",
                key=f"{self.key}.keys",
            )
        self.check_repeats(df)

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        """Remove the batch's staging directory under the path (its files, or Delta's scratch)."""
        staging = batch.staging(self.conf.path)
        fs.delete(staging, recursive=True)
        fs.delete_if_empty(staging.rsplit("/", 1)[0])  # the staging root

    @property
    def _options(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.conf.options.items()}

    def write(self, df: DataFrame) -> None:
        c = self.conf
        writer = df.write.format(c.type).mode("overwrite" if c.mode == "overwrite" else "append")
        writer = writer.options(**self._options)
        if c.partition_by:
            writer = writer.partitionBy(*c.partition_by)
        writer.save(c.path)
