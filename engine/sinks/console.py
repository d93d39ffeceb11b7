"""Print a branch's first rows to stdout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.sinks.base import Sink
from engine.sinks.conf import ConsoleSinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ConsoleSink(Sink):
    Conf = ConsoleSinkConf
    conf: ConsoleSinkConf

    def _write(self, df: DataFrame) -> None:
        print(f"-- sink `{self.name}` (branch `{self.conf.from_}`)", flush=True)
        df.show(self.conf.rows, truncate=self.conf.truncate)
