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
from engine.commit.delta_files import table_schema, write_files
from engine.commit.steps import DeltaWrite
from engine.sinks.conf import DeltaSinkConf
from engine.sinks.contract import Contract
from engine.sinks.table import TableSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


class DeltaSink(TableSink):
    """See :class:`~engine.sinks.conf.DeltaSinkConf` for its config."""

    Conf = DeltaSinkConf
    conf: DeltaSinkConf

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        options = self._options
        version = fs.delta_version(c.path)  # one listing of its log: the contract's and the commit's base
        if not (
            c.mode == "overwrite" and options.get("overwriteSchema", "").lower() == "true"
        ):  # it replaces the schema
            contract = Contract(c.schema_, self.name, c.path, merge=c.mode == "merge")
            df, adds_columns = contract.apply(df, table_schema(df.sparkSession, c.path, version=version))
            options = {**options, "mergeSchema": "true"} if adds_columns else options
        return stage_delta(
            df,
            batch,
            fs,
            sink=self.name,
            table=c.path,
            app_id=f"{batch.app_id}:{self.name}",
            mode=c.mode,
            partition_by=list(c.partition_by),
            keys=list(c.keys),
            options=options,
            base_version=version,
        )


def stage_delta(
    df: DataFrame,
    batch: BatchRef,
    fs: HadoopFs,
    *,
    sink: str,
    table: str,
    app_id: str,
    mode: str = "append",
    partition_by: list[str] | None = None,
    keys: list[str] | None = None,
    options: dict[str, str] | None = None,
    base_version: int | None = None,
) -> Staged:
    """Stage ``df`` for one Delta commit to ``table`` (a sink's or the error table's): written by
    Delta's writer if it can be committed as it is, else as Parquet in the batch's staging.
    ``base_version``: the table's latest version, if the caller listed its log already."""
    base_version = fs.delta_version(table) if base_version is None else base_version
    written = write_files(df, table, partition_by or [], mode=mode, options=options or {}, scratch=batch.staging(table))
    staging = None
    if written is None:
        staging = batch.staging(table)
        df.write.mode("overwrite").parquet(staging)
    step = DeltaWrite(
        sink=sink,
        table=table,
        staging=staging or "",
        mode=mode,
        app_id=app_id,
        batch=batch.number,
        base_version=base_version,
        partition_by=partition_by or [],
        keys=keys or [],
        options=options or {},
        user_metadata=batch.user_metadata,
        written=written.to_json() if written else {},
    )
    return Staged([step], staging)
