"""Change data applied to a Delta table: the Delta sink's ``mode = apply_changes``.

Each record of the branch is an event of its key (``keys``): a delete where ``delete_when``
holds, an upsert otherwise, ordered among the key's events by ``sequence_by``.

Staging (:meth:`Changes.staged`) flags the deletes, fails the batch on an event without a
sequence (naming the sink and the key) and reduces the batch: SCD1 keeps each key's last event,
SCD2 one event per key and sequence. Of several events of one key with one sequence, a delete
wins, then the row greatest by its other columns, so an exact repeat is one event and the choice
never depends on the order Spark read them in.

Publishing (:meth:`Changes.apply`) is one Delta commit, carrying the batch's ``txnAppId`` and
``txnVersion`` like ``merge`` does, so a replay never applies a batch twice:

- **SCD1**, a MERGE on the keys: an event changes a row only if its sequence is greater than the
  row's. An upsert replaces the row (or inserts it); a delete removes it, or with
  ``soft_delete`` keeps it with ``deleted_at`` and its sequence set to the delete's, so that a
  late event older than the delete is refused in a later run too. (A hard delete leaves nothing
  to compare a later run's late event with: that event inserts the key again.)
- **Tombstones** (SCD1 with hard deletes, ``tombstone_seconds``): a deleted key leaves nothing
  in the table to compare a later run's late event with, so each delete is also recorded, as its
  key and sequence, in a Delta table beside the table (``<table>/_engine_tombstones``, which
  Delta's readers and VACUUM leave alone, like ``_engine_staging``). An upsert not newer than its
  key's greatest tombstone is left out of the MERGE (:meth:`Changes.unrefused`); the batch's
  deletes are then appended to the tombstones (:meth:`Changes.deletes`), after those recorded
  more than ``tombstone_seconds`` ago are deleted (:meth:`Changes.forget`, at most once per
  ``tombstone_seconds``). An upsert that
  re-inserts a key leaves its tombstones: the row, newer, refuses whatever they would. So the
  MERGE gives the same table whether the tombstones are read before or after this batch's are
  appended, and a replay after a crash between the two commits is exact.
- **SCD2**: the history of every key the batch touches is rebuilt from the table's versions
  (each an upsert at ``valid_from``; a ``valid_to`` that opens no version is a delete) and the
  batch's events, in sequence order; an event whose sequence the key's history holds already
  changes nothing. Each upsert is a version from its sequence to the next event's
  (``valid_to``; null while current, ``is_current``). The MERGE on keys and ``valid_from``
  inserts the new versions and closes (or re-opens to a late event) the ones whose ``valid_to``
  moved, so a late event lands in its place in the history.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql.types import AtomicType, BinaryType, DataType, StructType

from engine.commit.delta_files import read_kept

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.storage.hadoop import HadoopFs

log = logging.getLogger(__name__)

DELETE = "__engine_delete"
"""The staged column saying the event deletes its key."""
_FROM_TABLE = "__engine_from_table"
_WAS_TO = "__engine_was_to"
_RANK = "__engine_rank"
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"
DELETED_AT = "deleted_at"
TOMBSTONES_DIR = "_engine_tombstones"
RECORDED_AT = "recorded_at"
"""A tombstone's column: when the run that recorded it committed (what the retention is counted from)."""
FORGOTTEN = "_engine_forgotten_at"
"""Beside the tombstones' log: when they were last forgotten (seconds since the epoch, as text)."""
_TOMB_KEY = "__engine_tombstone_key_{}"
_TOMB_SEQ = "__engine_tombstone_seq"


def tombstones_of(table: str) -> str:
    """Where the tombstones of ``table``'s deleted keys are kept: a Delta table inside its directory."""
    return f"{table.rstrip('/')}/{TOMBSTONES_DIR}"


@dataclass(frozen=True)
class Changes:
    """How a batch of change events applies to its table (stored in the commit step)."""

    keys: list[str]
    sequence_by: str
    scd: int = 1
    soft_delete: bool = False
    tombstone_seconds: float | None = None
    """SCD1 with hard deletes: how long a deleted key's tombstone is kept (``None``: no tombstones)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Changes:
        return cls(**data)

    @property
    def added(self) -> tuple[str, ...]:
        """The columns the engine keeps in the table besides the events' own."""
        if self.scd == 2:
            return (VALID_FROM, VALID_TO, IS_CURRENT)
        return (DELETED_AT,) if self.soft_delete else ()

    def data_schema(self, schema: StructType | None) -> StructType | None:
        """The table's columns without :attr:`added`: what the events' schema contract sees."""
        if schema is None:
            return None
        return StructType([f for f in schema.fields if f.name not in self.added])

    # -- staging --------------------------------------------------------------------------------

    def staged(self, df: DataFrame, *, delete_when: str | None, sink: str) -> DataFrame:
        """The batch's events as they are staged: with :data:`DELETE`, reduced (see the module).
        ``delete_when`` is parenthesized, so a trailing word is a syntax error, not an alias."""
        seq = _col(self.sequence_by)
        key = F.to_json(F.struct(*[_col(k) for k in self.keys]))
        message = F.concat(
            F.lit(f"sink `{sink}`: a change event has no `{self.sequence_by}` (its sequence_by column) at key "),
            key,
            F.lit(": it cannot be ordered; reject such records before the sink (a `check` converter)"),
        )
        deletes = F.coalesce(F.expr(f"({delete_when})"), F.lit(False)) if delete_when else F.lit(False)
        events = df.withColumn(DELETE, deletes)
        events = events.withColumn(self.sequence_by, F.when(seq.isNull(), F.raise_error(message)).otherwise(seq))
        by = [*self.keys] if self.scd == 1 else [*self.keys, self.sequence_by]
        return _first(events, by, [seq.desc(), F.col(DELETE).desc(), *_tie_breakers(events, by)])

    # -- publishing -----------------------------------------------------------------------------

    def new_table_rows(self, events: DataFrame) -> DataFrame:
        """The rows of a table these events create (there is none yet)."""
        if self.scd == 2:
            return self._versions(events.withColumn(_FROM_TABLE, F.lit(False))).drop(_FROM_TABLE, _WAS_TO)
        if self.soft_delete:
            deleted = F.when(F.col(DELETE), _col(self.sequence_by))
            return events.withColumn(DELETED_AT, deleted).drop(DELETE)
        return events.where(~F.col(DELETE)).drop(DELETE)

    def merge(self, session: SparkSession, table: str, events: DataFrame, *, evolve: bool) -> None:
        """Apply ``events`` to the existing ``table`` in one MERGE (on ``session``, which
        carries the batch's transaction confs)."""
        from delta.tables import DeltaTable

        target = DeltaTable.forPath(session, table)
        if self.scd == 2:
            source = self._history(target.toDF(), events)
            on = f"{self._same_key()} AND t.`{VALID_FROM}` = s.`{VALID_FROM}`"
            builder = target.alias("t").merge(source.alias("s"), on)
            moved: dict[str, str | Column] = {VALID_TO: f"s.`{VALID_TO}`", IS_CURRENT: f"s.`{IS_CURRENT}`"}
            builder = builder.whenMatchedUpdate(condition=f"NOT (t.`{VALID_TO}` <=> s.`{VALID_TO}`)", set=moved)
            builder = builder.whenNotMatchedInsert(values=_all(source, skip=(_FROM_TABLE, _WAS_TO)))
        else:
            builder = self._scd1(target, events)
        if evolve:  # the sink's schema contract adds the batch's new columns
            builder = builder.withSchemaEvolution()
        builder.execute()

    def _scd1(self, target: Any, events: DataFrame) -> Any:
        seq = self.sequence_by
        newer = f"s.`{seq}` > t.`{seq}`"
        values = _all(events, skip=(DELETE,))
        builder = target.alias("t").merge(events.alias("s"), self._same_key())
        if self.soft_delete:
            kind = events.schema[seq].dataType.simpleString()
            deleted: dict[str, str | Column] = {f"`{seq}`": f"s.`{seq}`", DELETED_AT: f"s.`{seq}`"}
            builder = builder.whenMatchedUpdate(condition=f"s.`{DELETE}` AND {newer}", set=deleted)
            builder = builder.whenMatchedUpdate(condition=newer, set={**values, DELETED_AT: f"CAST(NULL AS {kind})"})
            inserted = {**values, DELETED_AT: f"IF(s.`{DELETE}`, s.`{seq}`, NULL)"}
            return builder.whenNotMatchedInsert(values=inserted)
        builder = builder.whenMatchedDelete(condition=f"s.`{DELETE}` AND {newer}")
        builder = builder.whenMatchedUpdate(condition=newer, set=values)
        return builder.whenNotMatchedInsert(condition=f"NOT s.`{DELETE}`", values=values)

    def unrefused(self, spark: SparkSession, tombstones: str | None, events: DataFrame) -> DataFrame:
        """``events`` without the upserts the tombstones at ``tombstones`` refuse: those of a key
        deleted at a sequence not less than theirs (``None``: there is no tombstone table)."""
        if tombstones is None:
            return events
        renamed = [_col(k).alias(_TOMB_KEY.format(i)) for i, k in enumerate(self.keys)]
        tombs = read_kept(spark, tombstones).select(*renamed, _col(self.sequence_by).alias(_TOMB_SEQ))
        same = [events[f"`{k}`"].eqNullSafe(tombs[_TOMB_KEY.format(i)]) for i, k in enumerate(self.keys)]
        refused = ~events[f"`{DELETE}`"] & (tombs[_TOMB_SEQ] >= events[f"`{self.sequence_by}`"])
        # An anti join on the tombstones as they are (no aggregate of them first): Spark broadcasts
        # them when their Delta statistics say they are small, with no shuffle of either side.
        return events.join(tombs, reduce(Column.__and__, same) & refused, "left_anti")

    def deletes(self, events: DataFrame) -> DataFrame:
        """The tombstones of the batch's deletes: each key, its sequence and when it was recorded."""
        keys = [_col(k) for k in (*self.keys, self.sequence_by)]
        return events.where(F.col(DELETE)).select(*keys, F.current_timestamp().alias(RECORDED_AT)).coalesce(1)

    def forget(self, spark: SparkSession, fs: HadoopFs, tombstones: str, *, now: float | None = None) -> bool:
        """Delete the tombstones recorded more than :attr:`tombstone_seconds` ago, then VACUUM the
        files that held them; at most once per :attr:`tombstone_seconds`, since each is a DELETE
        and a VACUUM over the tombstones' log (Spark jobs; ~0.6 s even when nothing is due). When
        they were last forgotten is kept beside them (:data:`FORGOTTEN`; where there is no such
        file, as for tombstones an older engine kept, the clock starts now). So a tombstone is kept
        at least :attr:`tombstone_seconds` after it was recorded, and less than twice that while
        batches delete. Whether they were forgotten this time."""
        from delta.tables import DeltaTable

        assert self.tombstone_seconds is not None
        now = time.time() if now is None else now
        marker = f"{tombstones}/{FORGOTTEN}"
        last = _seconds_in(fs, marker)
        if last is not None and now - last < self.tombstone_seconds:
            return False
        if last is not None:
            cutoff = f"timestamp_millis(unix_millis(current_timestamp()) - {round(self.tombstone_seconds * 1000)})"
            kept = DeltaTable.forPath(spark, tombstones)
            kept.delete(f"`{RECORDED_AT}` < {cutoff}")
            kept.vacuum()  # Delta's own retention: files it removed long enough ago
        started(fs, tombstones, now)
        return last is not None

    def _same_key(self) -> str:
        return " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.keys)

    def _history(self, table: DataFrame, events: DataFrame) -> DataFrame:
        """The versions of the keys ``events`` touch, rebuilt with them: the table's versions
        whose ``valid_to`` moved, and the new ones."""
        touched = events.select(*[_col(k) for k in self.keys]).distinct()
        same = [table[k].eqNullSafe(touched[k]) for k in self.keys]
        mine = table.join(touched, reduce(Column.__and__, same), "left_semi")
        after = F.lead(VALID_FROM).over(Window.partitionBy(*[_col(k) for k in self.keys]).orderBy(VALID_FROM))
        mine = mine.withColumn("__engine_next", after)
        upserts = mine.drop(VALID_FROM, IS_CURRENT, "__engine_next").withColumnRenamed(VALID_TO, _WAS_TO)
        upserts = upserts.withColumn(DELETE, F.lit(False)).withColumn(_FROM_TABLE, F.lit(True))
        ended = F.col(VALID_TO).isNotNull() & ~F.col("__engine_next").eqNullSafe(F.col(VALID_TO))
        deletes = mine.where(ended).select(
            *[_col(k) for k in self.keys],
            F.col(VALID_TO).alias(self.sequence_by),
            F.lit(True).alias(DELETE),
            F.lit(True).alias(_FROM_TABLE),
        )
        batch = events.withColumn(_FROM_TABLE, F.lit(False))
        every = upserts.unionByName(deletes, allowMissingColumns=True).unionByName(batch, allowMissingColumns=True)
        # one event per key and sequence: the table's own (the history holds it already) first
        every = _first(every, [*self.keys, self.sequence_by], [F.col(_FROM_TABLE).desc()])
        versions = self._versions(every)
        return versions.where(~F.col(_FROM_TABLE) | ~F.col(_WAS_TO).eqNullSafe(F.col(VALID_TO)))

    def _versions(self, events: DataFrame) -> DataFrame:
        """Each upsert as a version: from its sequence to the key's next event's."""
        seq = _col(self.sequence_by)
        following = F.lead(seq).over(Window.partitionBy(*[_col(k) for k in self.keys]).orderBy(seq))
        versions = events.withColumn(VALID_TO, following).where(~F.col(DELETE)).drop(DELETE)
        versions = versions.withColumn(VALID_FROM, seq).withColumn(IS_CURRENT, F.col(VALID_TO).isNull())
        if _WAS_TO not in versions.columns:
            versions = versions.withColumn(_WAS_TO, F.lit(None).cast(versions.schema[VALID_TO].dataType))
        data = [c for c in versions.columns if c not in (VALID_FROM, VALID_TO, IS_CURRENT)]
        return versions.select(*[_col(c) for c in data], VALID_FROM, VALID_TO, IS_CURRENT)


def started(fs: HadoopFs, tombstones: str, now: float | None = None) -> None:
    """Note ``now`` as when ``tombstones`` were last forgotten (:meth:`Changes.forget`): a new
    table of them starts the clock."""
    fs.write(f"{tombstones}/{FORGOTTEN}", repr(time.time() if now is None else now).encode())


def _seconds_in(fs: HadoopFs, marker: str) -> float | None:
    """The time a :data:`FORGOTTEN` file holds (``None``: none, or not a time, or unreadable, as a
    local file changed by something else than Hadoop is: its checksum no longer matches). Read as
    none, the clock starts again: tombstones are kept longer, never shorter."""
    from py4j.protocol import Py4JJavaError

    if fs.size(marker) is None:
        return None
    try:
        return float(fs.head(marker, 64).decode())
    except (ValueError, UnicodeDecodeError, Py4JJavaError) as e:
        log.warning("%s holds no time (%s): the tombstones' retention counts from now", marker, type(e).__name__)
        return None


def orderable(kind: DataType) -> bool:
    """Whether a sequence column of this type orders events (an atomic type but binary)."""
    return isinstance(kind, AtomicType) and not isinstance(kind, BinaryType)


def _first(df: DataFrame, by: list[str], order: list[Column]) -> DataFrame:
    """The first row of each group of ``by`` in ``order``."""
    rank = F.row_number().over(Window.partitionBy(*[_col(c) for c in by]).orderBy(*order))
    return df.withColumn(_RANK, rank).where(F.col(_RANK) == 1).drop(_RANK)


def _tie_breakers(df: DataFrame, by: list[str]) -> list[Column]:
    """The other columns, greatest first, where Spark can order them (not maps)."""
    skip = {*by, DELETE}
    return [
        _col(f.name).desc()
        for f in df.schema.fields
        if f.name not in skip and "map<" not in f.dataType.simpleString() and f.dataType.simpleString() != "variant"
    ]


def _all(df: DataFrame, *, skip: tuple[str, ...]) -> dict[str, str | Column]:
    """Every column of ``df`` but ``skip``, as MERGE assignments from the source ``s``."""
    return {f"`{c}`": f"s.`{c}`" for c in df.columns if c not in skip}


def _col(name: str) -> Column:
    return F.col(f"`{name}`")
