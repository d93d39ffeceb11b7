"""The sink ABC."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from engine.sinks.conf import SinkConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation

    from engine.commit.batch import BatchRef, Staged
    from engine.storage.hadoop import HadoopFs


class Sink(ABC):
    """Writes one branch. ``check()`` runs before anything is written. ``stage()`` writes the
    branch where no reader sees it yet and returns the commit steps that publish it."""

    Conf: ClassVar[type[SinkConf]]
    counts_while_staging: ClassVar[bool] = False
    """Whether :meth:`stage` reads its whole branch in one Spark action that writes it (not a
    ``show`` of its first rows): a run may then count its records while this sink stages them,
    and :meth:`discard` what it staged if its branch turns out empty or the read fails."""

    def __init__(self, conf: SinkConf, *, name: str, key: str) -> None:
        self.conf = conf
        self.name = name
        self.key = key

    def check(self, df: DataFrame) -> None:
        """Raise :class:`~engine.errors.ConfigError` if ``df`` cannot be written as configured."""

    @abstractmethod
    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged: ...

    def check_repeats(self, df: DataFrame) -> None:
        """Raise :class:`~engine.errors.ConfigError` if ``duplicates = last_by`` names a column the
        branch ``df`` does not have."""
        per = self.conf.one_row_per()
        missing = [c for c in per.rule.last_by if c not in df.columns] if per else []
        if per and missing:
            from engine.errors import ConfigError

            raise ConfigError(
                f"sink `{self.name}`: `duplicates = {per.rule}` orders by `{missing[0]}`, which branch "
                f"`{self.conf.from_}` does not have; columns: {', '.join(df.columns)}",
                key=f"{self.key}.duplicates",
            )

    def one_per_key(self, df: DataFrame) -> tuple[DataFrame, Observation | None]:
        """``df`` as a sink holding one row per key stages it (:func:`engine.sinks.repeats.one_per_key`),
        counted as it is written (the observation, for :meth:`counted`); as it is for any other sink."""
        per = self.conf.one_row_per()
        if per is None:
            return df, None
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from engine.sinks.repeats import one_per_key

        observation = Observation(f"{self.name}:kept")
        return one_per_key(df, sink=self.name, per=per).observe(
            observation, F.count(F.lit(1)).alias("rows")
        ), observation

    @staticmethod
    def counted(staged: Staged, observation: Observation | None) -> Staged:
        """``staged``, with the rows :meth:`one_per_key` counted while they were staged."""
        if observation is None:
            return staged
        from engine.commit.observations import observed

        found = observed(observation, wait=5.0)
        if found is not None:
            staged.rows = int(found["rows"])
        return staged

    def locations(self, dag: str) -> dict[str, object]:
        """What its commit steps (in DAG ``dag``) need that they may not store (a login), by the key
        the steps look it up under: the publisher hands it to them. Nothing by default."""
        return {}

    def discard(self, batch: BatchRef, fs: HadoopFs) -> None:
        """Throw away, unpublished, whatever :meth:`stage` of ``batch`` wrote (nothing by default)."""

    @abstractmethod
    def write(self, df: DataFrame) -> None:
        """Write ``df`` straight to the destination, outside the publish protocol."""
