"""A Delta table read by version range; the table version is the watermark.

Planning reads the commits after the watermark from ``_delta_log/<version>.json`` (one small Spark
read) to size each version (files, bytes, records from the add statistics) for throttling, and to
see what each version did:

- ``appends``: the new rows of ``(low, high]`` are the files those versions added with
  ``dataChange = true``, read from the snapshot at ``high`` and selected by file name. A version
  that removes rows (``dataChange = true`` removes: UPDATE, DELETE, MERGE) is refused. A
  compaction (OPTIMIZE: removes with ``dataChange = false``) that rewrites a file added inside the
  range would hide it from the snapshot, so the range stops just before such a version.
- ``cdf``: the change data feed of ``[low + 1, high]``.

The first run (no watermark) reads the snapshot at the latest version. A table whose latest version
is below the watermark (recreated), or whose log no longer holds the versions after the watermark
(log retention), is a clear error, never a silent skip or re-read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from engine.columns import DATASET
from engine.errors import ConfigError, JobFailedError
from engine.sources.base import PlanContext, Source
from engine.sources.conf import DeltaSourceConf
from engine.sources.workunits import Candidate, Size, WorkUnit, take
from engine.state.watermarks import LongWatermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
CDF_COLUMNS = "_change_type STRING, _commit_version BIGINT, _commit_timestamp TIMESTAMP"


@dataclass
class Version:
    """What one commit did."""

    version: int
    operation: str = ""
    added: list[str] = field(default_factory=list)
    """Names of files added with dataChange = true."""
    compacted: set[str] = field(default_factory=set)
    """Names of files removed with dataChange = false (a rewrite such as OPTIMIZE)."""
    removes_rows: bool = False
    size: Size = field(default_factory=Size)


@dataclass(frozen=True)
class Range:
    mode: str
    """``snapshot``, ``appends`` or ``cdf``."""
    start: int
    end: int
    files: tuple[str, ...] = ()


class DeltaSource(Source):
    """See :class:`~engine.sources.conf.DeltaSourceConf` for its config."""

    Conf = DeltaSourceConf
    conf: DeltaSourceConf

    @property
    def dataset(self) -> str:
        return self.conf.dataset_urn()

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        from delta.tables import DeltaTable

        if self.conf.path in not_yet:  # an upstream creates it: its change data feed is its own to set
            return
        if not DeltaTable.isDeltaTable(spark, self.conf.path):
            raise ConfigError(f"not a Delta table: {self.conf.path}", key=f"{self.key}.path")
        if self.conf.changes == "cdf" and not self._cdf_enabled(spark):
            raise ConfigError(
                f"the change data feed is off for {self.conf.path}: set its table property "
                "delta.enableChangeDataFeed = true (changes after that are readable), or use changes = appends",
                key=f"{self.key}.changes",
            )

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        latest = self._latest_version(spark)
        low = ctx.low(self.dataset)
        if low is not None and not isinstance(low, LongWatermark):
            raise ConfigError(f"dataset {self.dataset} has a {low.kind} watermark, not a version", key=self.key)
        if self.conf.backfill:
            first, last = self._backfill_range(latest)
            start = low.value + 1 if low is not None else first
            return [self._range_unit(spark, ctx, low, start, last)]
        if low is None:
            high = LongWatermark(latest)
            return [
                WorkUnit(self.dataset, None, high, payload=Range("snapshot", 0, latest), note="first run: snapshot")
            ]
        if latest < low.value:
            raise JobFailedError(
                f"{self.conf.path} is at version {latest}, below the stored watermark {low.value}: the table went "
                "backwards (recreated?). Nothing was read; check the table, then reset or set the checkpoint "
                f"(mode=checkpoint checkpoint.dataset={self.dataset})"
            )
        return [self._range_unit(spark, ctx, low, low.value + 1, latest)]

    def _range_unit(
        self, spark: SparkSession, ctx: PlanContext, low: LongWatermark | None, start: int, end: int
    ) -> WorkUnit:
        if start > end:
            return WorkUnit.carry(self.dataset, low, "no new versions")
        versions = self._versions(spark, start, end)
        if self.conf.changes == "appends":
            versions = self._appendable(versions)
        chosen = take(
            [Candidate(self.dataset, versions)],
            lambda v: v.size,
            per_dataset=ctx.per_dataset,
            per_run=ctx.per_run,
            guarantee=ctx.guarantee,
        )
        picked, throttled = chosen[self.dataset]
        if not picked:
            return WorkUnit.carry(self.dataset, low, "throttled" if throttled else "no new versions")
        last = picked[-1].version
        files = tuple(f for v in picked for f in v.added)
        size = Size(records=0, bytes=0, files=0)
        for v in picked:
            size = size + v.size
        note = f"versions {start}..{last}" + (" (throttled)" if throttled or last < end else "")
        payload = Range(self.conf.changes, start, last, files)
        return WorkUnit(self.dataset, low, LongWatermark(last), size=size, payload=payload, note=note)

    def _appendable(self, versions: list[Version]) -> list[Version]:
        """The versions an append-only read can take: refuse row changes, stop before a rewrite
        of a file added inside the range."""
        pending: set[str] = set()
        out = []
        for v in versions:
            if v.removes_rows:
                raise JobFailedError(
                    f"version {v.version} of {self.conf.path} ({v.operation or 'unknown operation'}) updates or "
                    "deletes rows; an append-only read would miss them. Read the change data feed "
                    "(changes = cdf, with delta.enableChangeDataFeed on), or move the watermark past it "
                    "deliberately with mode=checkpoint"
                )
            if v.compacted & pending:
                log.info(
                    "%s: version %d rewrites files added since the watermark; stopping before it",
                    self.conf.path,
                    v.version,
                )
                break
            pending.update(v.added)
            out.append(v)
        return out

    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        schema: StructType = spark.read.format("delta").load(self.conf.path).schema
        if self.conf.changes == "cdf":
            from pyspark.sql.types import StructType

            extra = StructType.fromDDL(CDF_COLUMNS)
            assert isinstance(extra, StructType)
            for f in extra.fields:
                schema = schema.add(f)
        return schema

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        (unit,) = [u for u in units if not u.empty]
        rng: Range = unit.payload
        path = self.conf.path
        if rng.mode == "snapshot":
            frame = spark.read.format("delta").option("versionAsOf", rng.end).load(path)
            if self.conf.changes == "cdf":
                frame = frame.select(
                    "*",
                    F.lit("insert").alias("_change_type"),
                    F.lit(rng.end).cast("bigint").alias("_commit_version"),
                    F.lit(None).cast("timestamp").alias("_commit_timestamp"),
                )
        elif rng.mode == "cdf":
            frame = (
                spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", rng.start)
                .option("endingVersion", rng.end)
                .load(path)
                .where(F.col("_change_type") != "update_preimage")
            )
        else:
            name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
            frame = (
                spark.read.format("delta").option("versionAsOf", rng.end).load(path).where(name.isin(list(rng.files)))
            )
        out: DataFrame = frame.select(*[F.col(f"`{f.name}`") for f in schema.fields]).withColumn(
            DATASET, F.lit(unit.dataset)
        )
        return out

    # -- the log ----------------------------------------------------------------------------------

    def _latest_version(self, spark: SparkSession) -> int:
        from delta.tables import DeltaTable

        row = DeltaTable.forPath(spark, self.conf.path).history(1).select("version").first()
        assert row is not None
        return int(row["version"])

    def _cdf_enabled(self, spark: SparkSession) -> bool:
        quoted = self.conf.path.replace("`", "``")
        props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{quoted}`").collect()}
        return str(props.get("delta.enableChangeDataFeed", "false")).lower() == "true"

    def _backfill_range(self, latest: int) -> tuple[int, int]:
        try:
            first = int(self.conf.from_) if self.conf.from_ is not None else 0
            last = int(self.conf.to) if self.conf.to is not None else latest
        except ValueError as exc:
            raise ConfigError(f"a Delta backfill range is versions: {exc}", key=f"{self.key}.from") from exc
        return first, min(last, latest)

    def _versions(self, spark: SparkSession, start: int, end: int) -> list[Version]:
        paths = [f"{self.conf.path.rstrip('/')}/_delta_log/{v:020d}.json" for v in range(start, end + 1)]
        try:
            lines = spark.read.text(paths).select(F.input_file_name().alias("file"), "value").collect()
        except AnalysisException as exc:
            raise JobFailedError(
                f"the Delta log of {self.conf.path} no longer holds versions {start}..{end} (log retention): "
                "those changes cannot be read incrementally any more. Reprocess from a snapshot by resetting the "
                f"checkpoint (mode=checkpoint checkpoint.action=reset checkpoint.dataset={self.dataset})"
            ) from exc
        by_version: dict[int, Version] = {v: Version(v) for v in range(start, end + 1)}
        for row in lines:
            number = int(row["file"].rsplit("/", 1)[1].split(".")[0])
            _apply(by_version[number], json.loads(row["value"]))
        return [by_version[v] for v in range(start, end + 1)]


def _apply(version: Version, action: dict[str, Any]) -> None:
    if "commitInfo" in action:
        version.operation = str(action["commitInfo"].get("operation", ""))
    add = action.get("add")
    if add and add.get("dataChange", True):
        version.added.append(add["path"].rsplit("/", 1)[-1])
        stats = json.loads(add["stats"]) if add.get("stats") else {}
        version.size = version.size + Size(records=stats.get("numRecords"), bytes=int(add.get("size", 0)), files=1)
    remove = action.get("remove")
    if remove:
        if remove.get("dataChange", True):
            version.removes_rows = True
        else:
            version.compacted.add(remove["path"].rsplit("/", 1)[-1])
