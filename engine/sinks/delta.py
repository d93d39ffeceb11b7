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

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from engine.commit.apply_changes import DELETE, RECORDED_AT, Changes, orderable, tombstones_of
from engine.commit.batch import BatchRef, Staged
from engine.commit.delta_files import staged_schema, table_schema, write_files
from engine.commit.observations import observed
from engine.commit.steps import DeltaWrite, RecordTombstones
from engine.errors import ConfigError
from engine.sinks.conf import DeltaSinkConf
from engine.sinks.contract import Contract
from engine.sinks.path_sink import PathSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.storage.hadoop import HadoopFs


class DeltaSink(PathSink):
    """See :class:`~engine.sinks.conf.DeltaSinkConf` for its config."""

    Conf = DeltaSinkConf
    conf: DeltaSinkConf

    @property
    def changes(self) -> Changes | None:
        """``mode = apply_changes``: how the branch's events apply to the table."""
        c = self.conf
        if c.mode != "apply_changes":
            return None
        assert c.sequence_by is not None
        hard = c.scd == 1 and c.delete_when and not c.soft_delete and c.tombstone_retention > 0
        kept = c.tombstone_retention if hard else None
        return Changes(list(c.keys), c.sequence_by, scd=c.scd, soft_delete=c.soft_delete, tombstone_seconds=kept)

    def check(self, df: DataFrame) -> None:
        super().check(df)
        changes, c = self.changes, self.conf
        if changes is None:
            return
        assert c.sequence_by is not None
        if c.sequence_by not in df.columns:
            raise ConfigError(
                f"sink `{self.name}` orders change events by `{c.sequence_by}`, which branch `{c.from_}` does not "
                f"have; columns: {', '.join(df.columns)}",
                key=f"{self.key}.sequence_by",
            )
        kind = df.schema[c.sequence_by].dataType
        if not orderable(kind):
            raise ConfigError(
                f"sink `{self.name}`: `sequence_by` column `{c.sequence_by}` is {kind.simpleString()}, which does not "
                "order events; use a number, a timestamp, a date or a string",
                key=f"{self.key}.sequence_by",
            )
        taken = [n for n in df.columns if n in changes.added or n == DELETE]
        if taken:
            raise ConfigError(
                f"sink `{self.name}`: branch `{c.from_}` has a column `{taken[0]}`, which `apply_changes` "
                f"{'with scd = 2' if c.scd == 2 else 'with soft_delete'} keeps for itself; rename it in the chain",
                key=f"{self.key}.mode",
            )
        if c.delete_when:
            try:
                condition = df.select(F.expr(f"({c.delete_when})").alias("d")).schema["d"].dataType
            except (AnalysisException, ParseException) as exc:
                raise ConfigError(
                    f"sink `{self.name}`: `delete_when` is not a condition over branch `{c.from_}`: "
                    f"{str(exc).strip().splitlines()[0]}",
                    key=f"{self.key}.delete_when",
                ) from exc
            if not isinstance(condition, BooleanType):
                raise ConfigError(
                    f"sink `{self.name}`: `delete_when` is {condition.simpleString()}, not a condition (true or false)",
                    key=f"{self.key}.delete_when",
                )
        if changes.tombstone_seconds is not None:
            self._check_tombstones(df, changes)

    def _check_tombstones(self, df: DataFrame, changes: Changes) -> None:
        """The tombstones kept for this table must be of its keys and sequence: ones kept while the
        sink said others (its config changed since) could not be read, and would block every run."""
        path = tombstones_of(self.conf.path)
        kept = table_schema(df.sparkSession, path)
        if kept is None:
            return
        have = {f.name.lower(): f.dataType for f in kept.fields}
        table = table_schema(df.sparkSession, self.conf.path) or df.schema  # what the staged events are cast to
        types = {f.name.lower(): f.dataType for f in table.fields}
        missing = [
            n
            for n in (*changes.keys, changes.sequence_by)
            if n.lower() not in have or (n.lower() in types and types[n.lower()] != have[n.lower()])
        ]
        if missing:
            said = ", ".join(f.name for f in kept.fields if f.name != RECORDED_AT)
            raise ConfigError(
                f"sink `{self.name}`: the tombstones of its deletes at {path} are of columns {said}, kept while "
                f"the sink had other `keys` or `sequence_by`; it has no {', '.join(missing)} of the table's type. "
                f"Delete {path} (a late event older than a delete it holds may then insert its key again), or set "
                "tombstone_retention = 0",
                key=f"{self.key}.{'sequence_by' if changes.sequence_by in missing else 'keys'}",
            )

    def stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        df, kept = self.one_per_key(df)  # a merge's keys, apply_changes' keys and sequences: each once
        return self.counted(self._stage(df, batch, fs), kept)

    def _stage(self, df: DataFrame, batch: BatchRef, fs: HadoopFs) -> Staged:
        c = self.conf
        options = self._options
        version = fs.delta_version(c.path)  # one listing of its log: the contract's and the commit's base
        if self.changes is not None:
            return self._stage_changes(df, batch, fs, self.changes, version)
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

    def _stage_changes(self, df: DataFrame, batch: BatchRef, fs: HadoopFs, changes: Changes, version: int) -> Staged:
        """The batch's change events, reduced (:meth:`Changes.staged`), as Parquet in its staging;
        the commit step applies them."""
        c = self.conf
        contract = Contract(c.schema_, self.name, c.path, merge=True)
        table = changes.data_schema(table_schema(df.sparkSession, c.path, version=version))
        df, adds_columns = contract.apply(df, table)
        return stage_delta(
            changes.staged(df, delete_when=c.delete_when, sink=self.name),
            batch,
            fs,
            sink=self.name,
            table=c.path,
            app_id=f"{batch.app_id}:{self.name}",
            mode=c.mode,
            partition_by=list(c.partition_by),
            keys=list(c.keys),
            options={**self._options, "mergeSchema": "true"} if adds_columns else self._options,
            base_version=version,
            changes=changes,
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
    changes: Changes | None = None,
) -> Staged:
    """Stage ``df`` for one Delta commit to ``table`` (a sink's or the error table's): written by
    Delta's writer if it can be committed as it is, else as Parquet in the batch's staging.
    ``base_version``: the table's latest version, if the caller listed its log already.
    ``changes``: ``df`` holds change events the commit step applies (always staged as Parquet);
    with tombstones, the batch's deletes are counted while it is staged, so that a batch without
    any has no step recording them."""
    deletes = None
    if changes is not None and changes.tombstone_seconds is not None:
        deletes = Observation()
        df = df.observe(deletes, F.count_if(F.col(DELETE)).alias("deletes"))
    base_version = fs.delta_version(table) if base_version is None else base_version
    scratch = batch.staging(table)
    written = None
    if changes is None:
        written = write_files(df, table, partition_by or [], mode=mode, options=options or {}, scratch=scratch)
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
        changes=changes.to_json() if changes else {},
        staged_schema=staged_schema(df) if staging else "",
    )
    counted = observed(deletes, wait=5.0) if deletes is not None else None
    if changes is None or changes.tombstone_seconds is None or counted == {"deletes": 0}:
        return Staged([step], staging)
    tombstones = RecordTombstones(
        sink=sink,
        table=table,
        staging=step.staging,
        app_id=app_id,
        batch=batch.number,
        changes=changes.to_json(),
        user_metadata=batch.user_metadata,
        staged_schema=step.staged_schema,
        deletes=-1 if counted is None else int(counted["deletes"]),
    )
    return Staged([step, tombstones], staging)
