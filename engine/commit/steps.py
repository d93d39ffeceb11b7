"""Commit steps: one publish action each, with ``verify()`` (is it done?) and ``execute()`` (do
it; safe to repeat), serialisable to a JSON object so a commit sequence can be stored before any
step runs and replayed by a later run.

- :class:`RenameFiles`: move a file sink's staged files into place (atomic per file where the file
  system's rename is: local disks, HDFS).
- :class:`DeleteFiles`: remove a file sink's previous files (``mode = overwrite``).
- :class:`DeltaWrite`: append, overwrite or merge staged records into a Delta table as one Delta
  commit carrying ``txnAppId``/``txnVersion`` (Delta skips a version it already has) and the batch
  and watermarks in the commit's user metadata.
- :class:`RecordTombstones`: ``apply_changes`` with hard deletes: append the batch's deletes to the
  table's tombstones.
- :class:`DeleteStaging`: remove the batch's staging directories.
- :class:`LogFiles`: add the files the committed datasets read to the file log (one append).
- :class:`SetWatermarks`: save the datasets' new high watermarks (one append to the state table).
"""

from __future__ import annotations

import importlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from engine.commit.delta_files import (
    WrittenFiles,
    commit_or_rewrite,
    read_staged,
    transaction_version,
    write_files,
)
from engine.commit.errors import StepError
from engine.platform.jvm import session_settings
from engine.state import watermarks
from engine.state.rows import DatasetState, FileRead, utcnow
from engine.state.store import StateStore
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass
class StepContext:
    spark: SparkSession
    store: StateStore
    """Where ``SetWatermarks`` and ``LogFiles`` write."""
    fs: HadoopFs
    fresh: bool = True
    """The sequence was written by this run (``False``: replayed by recovery)."""
    midway: Callable[[], None] = lambda: None
    """Called halfway through a step that moves many files (the ``mid_step`` kill point)."""
    locations: Mapping[str, object] = field(default_factory=dict)
    """The file systems of the running job's copy DAGs by URL, with their options and credentials
    (:class:`engine.copy.fs.Location`): steps store URLs, never credentials."""


_KINDS: dict[str, type[CommitStep]] = {}
_ELSEWHERE = {
    "jdbc_publish": "engine.commit.jdbc",
    "jdbc_drop_staging": "engine.commit.jdbc",
    "kafka_send": "engine.commit.kafka",
}
"""Step kinds of modules that import this one, by the module that defines them (imported on use)."""


@dataclass
class CommitStep(ABC):
    kind: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            _KINDS[cls.kind] = cls

    @abstractmethod
    def verify(self, ctx: StepContext) -> bool:
        """Whether this step's effect is already in place."""

    @abstractmethod
    def execute(self, ctx: StepContext) -> None:
        """Put the effect in place; repeating it after a partial run finishes the job."""

    @abstractmethod
    def describe(self) -> str: ...

    def to_json(self) -> dict[str, Any]:
        """Its fields as they are (all JSON values): ``asdict`` deep-copied a copy DAG's 20,000 file
        rows first, and set off a full garbage collection doing so."""
        return {"kind": self.kind, **{f.name: getattr(self, f.name) for f in fields(self)}}

    @staticmethod
    def from_json(data: dict[str, Any]) -> CommitStep:
        data = dict(data)
        kind = data.pop("kind", "")
        cls = _KINDS.get(kind)
        if cls is None and kind in _ELSEWHERE:  # a step kind defined beside what it publishes to
            importlib.import_module(_ELSEWHERE[kind])
            cls = _KINDS.get(kind)
        if cls is None:
            raise StepError(f"unknown commit step kind {kind!r} (written by a newer engine?)")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class RenameFiles(CommitStep):
    kind: ClassVar[str] = "rename_files"
    sink: str
    staging: str
    target: str
    files: list[list[Any]]
    """``[relative path, size]`` of each staged file."""

    def verify(self, ctx: StepContext) -> bool:
        return all(ctx.fs.size(f"{self.target}/{rel}") == size for rel, size in self.files)

    def execute(self, ctx: StepContext) -> None:
        half = len(self.files) // 2
        for i, (rel, size) in enumerate(self.files):
            if i == half:
                ctx.midway()
            dst = f"{self.target}/{rel}"
            found = ctx.fs.size(dst)
            if found == size:
                continue  # moved by an earlier attempt
            if found is not None:
                raise StepError(f"sink `{self.sink}`: {dst} exists with {found} bytes, expected {size}")
            src = f"{self.staging}/{rel}"
            if ctx.fs.size(src) is None:
                raise StepError(
                    f"sink `{self.sink}`: staged file {rel} is missing from {self.staging} and not in {self.target}: "
                    "the staging directory was removed before the batch was published"
                )
            ctx.fs.rename(src, dst)

    def describe(self) -> str:
        return f"rename {len(self.files)} staged file(s) of sink `{self.sink}` into {self.target}"


@dataclass
class DeleteFiles(CommitStep):
    kind: ClassVar[str] = "delete_files"
    sink: str
    target: str
    files: list[str]
    """Paths relative to ``target``."""

    def verify(self, ctx: StepContext) -> bool:
        return not any(ctx.fs.exists(f"{self.target}/{rel}") for rel in self.files)

    def execute(self, ctx: StepContext) -> None:
        for i, rel in enumerate(self.files):
            if i == len(self.files) // 2:
                ctx.midway()
            ctx.fs.delete(f"{self.target}/{rel}")

    def describe(self) -> str:
        return f"delete the {len(self.files)} previous file(s) of sink `{self.sink}` in {self.target}"


@dataclass
class DeltaWrite(CommitStep):
    kind: ClassVar[str] = "delta_write"
    sink: str
    table: str
    staging: str
    mode: str
    """``append``, ``overwrite`` or ``merge``."""
    app_id: str
    batch: int
    base_version: int
    """The table's version when the sequence was written (-1: no table yet)."""
    partition_by: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    user_metadata: str = ""
    written: dict[str, Any] = field(default_factory=dict)
    """The files Delta's writer put in the table's directory at staging
    (:class:`~engine.commit.delta_files.WrittenFiles`): committed as they are. Empty: the batch was
    staged as Parquet in ``staging`` and is written to the table here."""
    changes: dict[str, Any] = field(default_factory=dict)
    """``apply_changes``: how the staged events apply (:class:`~engine.commit.apply_changes.Changes`)."""
    staged_schema: str = ""
    """The schema of the Parquet in ``staging`` (:func:`~engine.commit.delta_files.staged_schema`;
    empty: read from its files)."""

    def verify(self, ctx: StepContext) -> bool:
        """Whether the table moved past ``base_version`` and its ``txn`` for this app id is at this
        batch or later. Delta's own library reads the log (checkpoints too, so a log cleaned up
        since still answers), with the credentials the table is written with."""
        if ctx.fs.delta_version(self.table) <= self.base_version:
            return False
        return transaction_version(ctx.spark, self.table, self.app_id) >= self.batch

    def execute(self, ctx: StepContext) -> None:
        before = ctx.fs.delta_version(self.table)
        if self.written:
            self._commit_written(ctx, WrittenFiles.from_json(self.written))
        elif self.mode == "apply_changes":
            self._apply_changes(ctx, exists=before >= 0)
        elif self.mode == "merge" and before >= 0:
            self._merge(ctx.spark)
        else:
            self._write(read_staged(ctx.spark, self.staging, self.staged_schema))
        if ctx.fresh and ctx.fs.delta_version(self.table) == before:
            raise StepError(
                f"sink `{self.sink}`: Delta skipped the write of batch {self.batch} to {self.table} because the "
                f"table already holds app id `{self.app_id}` at that batch or later. The commit log no longer "
                "matches the table (was `_engine/commit_log` deleted or the warehouse changed?)"
            )

    def _commit_written(self, ctx: StepContext, written: WrittenFiles) -> None:
        """Commit the files written at staging; if the table changed since, write them again
        through Delta's writer (which applies its schema rules to the change)."""
        if not ctx.fresh:  # a replay, maybe much later: a VACUUM may have removed them meanwhile
            for path, action in zip(written.paths(self.table), written.actions, strict=True):
                if ctx.fs.size(path) != json.loads(action)["add"]["size"]:
                    raise StepError(
                        f"sink `{self.sink}`: file {path}, written for batch {self.batch}, is missing or changed: "
                        "it was removed (by VACUUM?) before the batch was published"
                    )
        commit_or_rewrite(
            ctx.spark,
            ctx.fs,
            self.table,
            written,
            rewrite=self._write,
            mode=self.mode,
            app_id=self.app_id,
            batch=self.batch,
            partition_by=self.partition_by,
            user_metadata=self.user_metadata,
        )

    def discard(self, ctx: StepContext) -> None:
        """Delete the files written at staging, unless the table holds them (the batch is abandoned)."""
        if self.written and not self.verify(ctx):
            self.unstage(ctx.fs)

    def unstage(self, fs: HadoopFs) -> None:
        """Delete the files Delta's writer put in the table's directory at staging, and the folders
        that held only them (the table's own, if the batch was to create it): the batch is given up
        before any sequence named them, so no reader of the folder sees them as data."""
        if not self.written:
            return
        table = self.table.rstrip("/")
        folders: set[str] = set()
        for path in WrittenFiles.from_json(self.written).paths(table):
            fs.delete(path)
            folder = path.rsplit("/", 1)[0]
            while folder.startswith(table + "/"):
                folders.add(folder)
                folder = folder.rsplit("/", 1)[0]
        for folder in sorted(folders, key=len, reverse=True):  # partition folders, deepest first
            fs.delete_if_empty(folder)
        if self.base_version < 0:
            fs.delete_if_empty(table)

    def _write(self, df: DataFrame) -> None:
        writer = (
            df.write.format("delta")
            .mode("overwrite" if self.mode == "overwrite" else "append")
            .options(**self.options)
            .option("txnAppId", self.app_id)
            .option("txnVersion", str(self.batch))
            .option("userMetadata", self.user_metadata)
        )
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        writer.save(self.table)

    @property
    def _evolves(self) -> bool:
        """Whether the sink's schema contract adds the batch's new columns to the table."""
        return str(self.options.get("mergeSchema", "")).lower() == "true"

    def _merge(self, spark: SparkSession) -> None:
        from delta.tables import DeltaTable

        session = dml_session(spark, self.app_id, self.batch, self.user_metadata)
        source = read_staged(session, self.staging, self.staged_schema)
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.keys)
        merge = DeltaTable.forPath(session, self.table).alias("t").merge(source.alias("s"), on)
        if self._evolves:
            merge = merge.withSchemaEvolution()
        merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def _apply_changes(self, ctx: StepContext, *, exists: bool) -> None:
        """The staged change events applied (:mod:`engine.commit.apply_changes`): to a new table as its
        first version, to an existing one by one MERGE; without the upserts a tombstone refuses."""
        from engine.commit.apply_changes import Changes, tombstones_of

        changes = Changes.from_json(self.changes)
        kept = tombstones_of(self.table) if changes.tombstone_seconds is not None else None
        tombstones = kept if kept and ctx.fs.delta_version(kept) >= 0 else None
        if not exists:
            events = changes.unrefused(ctx.spark, tombstones, read_staged(ctx.spark, self.staging, self.staged_schema))
            self._write(changes.new_table_rows(events))
            return
        session = dml_session(ctx.spark, self.app_id, self.batch, self.user_metadata)
        events = changes.unrefused(session, tombstones, read_staged(session, self.staging, self.staged_schema))
        changes.merge(session, self.table, events, evolve=self._evolves)

    def describe(self) -> str:
        return f"{self.mode} batch {self.batch} into Delta table {self.table} (sink `{self.sink}`)"


@dataclass
class RecordTombstones(CommitStep):
    """``apply_changes`` with hard deletes: the batch's deletes appended to the table's tombstones
    (:meth:`~engine.commit.apply_changes.Changes.deletes`), after the table's own commit, once those past
    their retention are deleted (:meth:`~engine.commit.apply_changes.Changes.forget`). A batch without
    deletes has no such step (counted while it was staged), or commits nothing here; older
    tombstones go with a later batch that deletes."""

    kind: ClassVar[str] = "record_tombstones"
    sink: str
    table: str
    staging: str
    app_id: str
    batch: int
    changes: dict[str, Any]
    user_metadata: str = ""
    staged_schema: str = ""
    """As :attr:`DeltaWrite.staged_schema`."""
    deletes: int = -1
    """The batch's deletes, counted while it was staged (-1: not counted)."""

    @property
    def tombstones(self) -> str:
        from engine.commit.apply_changes import tombstones_of

        return tombstones_of(self.table)

    def verify(self, ctx: StepContext) -> bool:
        """Done when the tombstones hold this batch's txn, or when its staging is gone: only a
        later step (``DeleteStaging``) removes it, after this one ran (a batch without deletes
        commits nothing here)."""
        if not ctx.fs.exists(self.staging):
            return True
        if ctx.fs.delta_version(self.tombstones) < 0:
            return False
        return transaction_version(ctx.spark, self.tombstones, self.app_id) >= self.batch

    def execute(self, ctx: StepContext) -> None:
        from engine.commit.apply_changes import Changes, started

        changes = Changes.from_json(self.changes)
        deletes = changes.deletes(read_staged(ctx.spark, self.staging, self.staged_schema))
        if self.deletes == 0 or (self.deletes < 0 and deletes.isEmpty()):
            return
        new = ctx.fs.delta_version(self.tombstones) < 0
        if not new:  # not the batch's own: a crash may leave it to a later one
            changes.forget(ctx.spark, ctx.fs, self.tombstones)
        self._append(ctx, deletes)
        if new:
            started(ctx.fs, self.tombstones)

    def _append(self, ctx: StepContext, deletes: DataFrame) -> None:
        """The deletes appended with this batch's txn, written and committed as a staged plain
        append is (:mod:`~engine.commit.delta_files`): Delta's writer, given a txn, reads the
        tombstones' whole state with Spark jobs to check it (~0.4 s a batch); the checksum says it."""
        scratch = f"{self.staging}/_tombstones"
        written = write_files(deletes, self.tombstones, [], mode="append", options={}, scratch=scratch)
        if written is None:
            self._write(deletes)
            return
        commit_or_rewrite(
            ctx.spark,
            ctx.fs,
            self.tombstones,
            written,
            rewrite=self._write,
            mode="append",
            app_id=self.app_id,
            batch=self.batch,
            partition_by=[],
            user_metadata=self.user_metadata,
        )

    def _write(self, deletes: DataFrame) -> None:
        """The deletes appended through Delta's writer, with this batch's txn."""
        (
            deletes.write.format("delta")
            .mode("append")
            .option("txnAppId", self.app_id)
            .option("txnVersion", str(self.batch))
            .option("userMetadata", self.user_metadata)
            .save(self.tombstones)
        )

    def describe(self) -> str:
        return f"record the deletes of batch {self.batch} in {self.tombstones} (sink `{self.sink}`)"


def dml_session(spark: SparkSession, app_id: str, batch: int, user_metadata: str) -> SparkSession:
    """A session whose DML commits carry batch ``batch``'s txn of ``app_id``: idempotent DML takes
    it from session confs, set on a session of its own so they do not leak into other commits. It
    starts with the application's runtime confs (a new session has only the static ones: without
    ``spark.databricks.delta.snapshotPartitions`` a MERGE took 10 s more)."""
    session = spark.newSession()
    for key, value in session_settings(spark).items():
        if session.conf.isModifiable(key):
            session.conf.set(key, value)
    session.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    session.conf.set("spark.databricks.delta.write.txnVersion", str(batch))
    session.conf.set("spark.databricks.delta.commitInfo.userMetadata", user_metadata)
    # Its MERGEs read the batch's staged Parquet (and files of a fixed Delta version), which nothing
    # changes before the batch is published: Delta need not copy that source before reading it twice
    # (it does for a source that is not only Delta tables). A/B on the apply_changes bench, 6 and 8
    # rotated rounds: -0.18 s and -0.32 s of a 3.5 s batch.
    session.conf.set("spark.databricks.delta.merge.materializeSource", "none")
    return session


@dataclass
class DeleteStaging(CommitStep):
    kind: ClassVar[str] = "delete_staging"
    dirs: list[str]

    def verify(self, ctx: StepContext) -> bool:
        return not any(ctx.fs.exists(d) for d in self.dirs)

    def execute(self, ctx: StepContext) -> None:
        for d in self.dirs:
            ctx.fs.delete(d, recursive=True)
            ctx.fs.delete_if_empty(d.rsplit("/", 1)[0])

    def describe(self) -> str:
        return f"delete {len(self.dirs)} staging director{'y' if len(self.dirs) == 1 else 'ies'}"


@dataclass
class SetWatermarks(CommitStep):
    kind: ClassVar[str] = "set_watermarks"
    job: str
    dag: str
    scope: str
    run_id: str
    watermarks: dict[str, str]
    """Dataset URN -> the watermark's JSON."""

    def verify(self, ctx: StepContext) -> bool:
        stored = ctx.store.load_state(self.job, self.dag, self.scope)
        return all(
            d in stored and stored[d].watermark is not None and stored[d].watermark.to_json() == w  # type: ignore[union-attr]
            for d, w in self.watermarks.items()
        )

    def execute(self, ctx: StepContext) -> None:
        now = utcnow()
        rows = [
            DatasetState(self.job, self.dag, self.scope, d, watermarks.parse(w), self.run_id, now, note="run")
            for d, w in sorted(self.watermarks.items())
        ]
        if rows:
            ctx.store.save_state(rows)

    def describe(self) -> str:
        return f"set the high watermark of {len(self.watermarks)} dataset(s)"


@dataclass
class LogFiles(CommitStep):
    kind: ClassVar[str] = "log_files"
    job: str
    dag: str
    scope: str
    batch: int
    run_id: str
    files: list[list[Any]]
    """``[dataset, path, mtime ms, size, note]`` of every file the committed datasets read."""

    def verify(self, ctx: StepContext) -> bool:
        return ctx.store.files_logged(self.job, self.dag, self.scope, self.batch)

    def execute(self, ctx: StepContext) -> None:
        now = utcnow()
        ctx.store.log_files(
            [
                FileRead(self.job, self.dag, self.scope, d, p, int(m), int(n), self.batch, self.run_id, now, note)
                for d, p, m, n, note in self.files
            ]
        )

    def describe(self) -> str:
        return f"log the {len(self.files)} file(s) read"


def user_metadata(job: str, dag: str, batch: int, marks: dict[str, str]) -> str:
    """What a Delta commit carries: the batch and (for up to 20 datasets) the watermarks it publishes."""
    shown = {d: json.loads(w)["value"] for d, w in sorted(marks.items())[:20]}
    return json.dumps({"engine": {"job": job, "dag": dag, "batch": batch, "datasets": len(marks), "watermarks": shown}})
