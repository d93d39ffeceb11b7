"""Print a branch's first rows to stdout (no publish guarantee: it prints when staged)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.commit.batch import BatchRef, Staged
from engine.sinks.base import Sink
from engine.sinks.conf import ConsoleSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


class ConsoleSink(Sink):
    Conf = ConsoleSinkConf
    conf: ConsoleSinkConf

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        self.write(df)
        return Staged()

    def write(self, df: DataFrame) -> None:
        print(f"-- sink `{self.name}` (branch `{self.conf.from_}`)", flush=True)
        df.show(self.conf.rows, truncate=self.conf.truncate)
