"""A small Delta table of the engine's metadata (``<warehouse>/_engine/...``): created once with
its schema version, refused if a newer engine wrote it, appended to in one commit per call.

Metadata tables are append-only: appends never conflict in Delta, so many DAGs and many jobs can
share one metadata location. Readers pick the newest row per key.

Two ways to reach the same tables: :class:`MetaTable` through Spark (any file system Hadoop
reaches, with the session's credentials, a Spark job per call) and :class:`RustMetaTable`
through delta-rs, on a local disk or an object store (no Spark job, far cheaper:
`bench/state_machinery.py`).
:func:`meta_table` picks one by the run's ``metadata.backend`` (:mod:`engine.state.backends`). Both write
plain Delta (protocol 1/2), so a table written by one is read by the other. delta-rs creates a
table by writing its first commit (:func:`first_commit`, :func:`first_remote_commit`): delta-rs
refuses the engine's own table properties (``engine.schema_version``) at creation, and Spark's table
builder costs a second or more per table. On S3 delta-rs commits with a conditional put
(``If-None-Match``), so two writers of one version never both succeed.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from engine.errors import ConfigError, EngineError
from engine.state.backends import AUTO, RUST_SCHEMES
from engine.state.conflicts import is_transient
from engine.state.damage import find_damage
from engine.state.delta_create import VERSION_PROPERTY, first_commit, first_remote_commit
from engine.state.errors import MetadataDamagedError
from engine.storage.options import local_path, scheme, store_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TIDY_AT_FILES = 24
"""A metadata table is tidied once it holds this many data files: compacted into one file,
checkpointed, and files removed more than the table's retention ago (7 days) deleted. Every append
adds a file and every read opens them all (plus the replay of each commit since the last
checkpoint), so without it a copy job run hourly would read its state ever more slowly."""
log = logging.getLogger(__name__)
T = TypeVar("T")


def retry_conflicts(action: Callable[[], T], *, what: str, attempts: int = 8, racing: bool = False) -> T:
    """Run ``action``, retrying transient errors (:func:`~engine.state.conflicts.is_transient`:
    Delta's concurrency conflicts) with jittered backoff. ``racing``: also any error Spark or Delta
    raised (not the engine's, not Python's own), for idempotent actions such as creating or
    inspecting a table another job may be creating at this very moment, whose half-made table can
    fail in more ways than a conflict."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            conflict = is_transient(exc)
            if attempt == attempts or not (conflict or (racing and _raised_by_spark(exc))):
                raise
            delay = min(5.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.5)
            why = "concurrent commit conflict" if conflict else "another job may be at it too"
            log.info("%s: %s (%s); retrying in %.1fs", what, why, type(exc).__name__, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _raised_by_spark(exc: BaseException) -> bool:
    """An error from Spark or Delta's side (a Java exception through py4j, or one pyspark raised),
    as opposed to a mistake in Python (a missing jar is a ``TypeError``: retrying it only delays
    the message)."""
    return isinstance(exc, (Py4JJavaError, PySparkException)) and not isinstance(exc, EngineError)


class MetaTable:
    """One metadata table at ``path`` with the columns of ``ddl``, written by schema ``version``."""

    def __init__(self, spark: SparkSession, path: str, ddl: str, *, version: int, what: str) -> None:
        self.spark = spark
        self.path = path
        self.schema = _schema(ddl)
        self.version = version
        self.what = what
        self._checked = False
        self.properties: dict[str, str] = {}
        """The table's properties, once :meth:`check` has read them."""
        self.tidy_at = TIDY_AT_FILES
        self._files: int | None = None
        """Data files in the table: counted by :meth:`check`, then one more per append."""
        self._retry_at = 0
        """After a failed tidy: the file count to try again at."""

    def ensure(self, properties: dict[str, str] | None = None) -> MetaTable:
        """Create the table if missing (with ``properties`` if this call creates it) and check its
        schema version. Another job creating it at the same moment is a retried conflict."""

        def create() -> None:
            builder = (
                DeltaTable.createIfNotExists(self.spark)
                .location(self.path)
                .addColumns(self.schema)
                .property(VERSION_PROPERTY, str(self.version))
            )
            for key, value in (properties or {}).items():
                builder = builder.property(key, value)
            builder.execute()

        def create_and_check() -> MetaTable:
            create()
            self._checked = False
            return self.check()

        return retry_conflicts(create_and_check, what=f"creating the {self.what} table", racing=True)

    def exists(self) -> bool:
        if self._checked:
            return True
        with self.damage_named():  # Spark reads the log to answer
            return bool(DeltaTable.isDeltaTable(self.spark, self.path))

    def check(self) -> MetaTable:
        """Refuse a table written by a newer schema version (a metadata read, no Spark job; once
        per process: a table's schema version does not change under a running job)."""
        if self._checked:
            return self
        self.properties = retry_conflicts(
            self._properties, what=f"reading the {self.what} table", attempts=4, racing=True
        )
        self._check_version()
        self._checked = True
        return self

    def _properties(self) -> dict[str, str]:
        with self.damage_named():
            detail = self.spark.sql(f"DESCRIBE DETAIL {_quoted(self.path)}").first()
        assert detail is not None
        self._files = int(detail["numFiles"])
        return dict(detail["properties"] or {})

    def _check_version(self) -> None:
        found = int(self.properties[VERSION_PROPERTY]) if VERSION_PROPERTY in self.properties else None
        if found is not None and found > self.version:
            raise ConfigError(
                f"the {self.what} table was written by a newer engine (schema version {found} > {self.version}); "
                "upgrade the engine or point `warehouse` elsewhere",
                file=self.path,
            )

    @contextmanager
    def damage_named(self) -> Iterator[None]:
        """Let an error of the Delta reader through, unless the table's log holds an entry that
        does not parse: then say which table and which file (the readers' messages name neither)."""
        try:
            yield
        except (EngineError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a pyo3 panic is not an Exception
            local = local_path(self.path)
            found = find_damage(local) if local is not None else None
            if found is None:
                raise
            raise MetadataDamagedError(
                what=self.what, table=self.path, entry=found.entry, problem=found.problem, newest=found.newest
            ) from exc

    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        """Append ``rows`` (dicts by column name) in one commit."""
        names = self.schema.fieldNames()
        tuples = [tuple(r[n] for n in names) for r in rows]
        if tuples:
            frame = self.spark.createDataFrame(tuples, schema=self.schema).coalesce(1)  # one file per append
            with self.damage_named():
                retry_conflicts(
                    lambda: frame.write.format("delta").mode("append").save(self.path),
                    what=f"appending to {self.what}",
                )
            if self._files is not None:
                self._files += 1
                self._tidy_if_due()
        return len(tuples)

    def _tidy(self) -> None:
        """Compact the table into one file and delete files removed before its retention (Delta
        checkpoints a table every 10 commits on its own). A compaction never conflicts with
        appends: another job's rows written meanwhile stay."""
        table = DeltaTable.forPath(self.spark, self.path)
        table.optimize().executeCompaction()
        table.vacuum()
        self._files = 1

    def _tidy_if_due(self) -> None:
        """Tidy once the table holds ``tidy_at`` files. Tidying is upkeep: a failure is logged and
        tried again ``tidy_at`` files later, never raised (the rows are already committed, and a
        compaction that fails commits nothing)."""
        files = self._files
        if files is None or files < max(self.tidy_at, self._retry_at):
            return
        started = time.perf_counter()
        try:
            self._tidy()
        except Exception as exc:
            self._retry_at = files + self.tidy_at
            log.warning(
                "the %s table %s was not tidied (%s: %s); it stays correct, only slower to read",
                self.what,
                self.path,
                type(exc).__name__,
                exc,
            )
            return
        log.info(
            "tidied the %s table %s: %s file(s) into 1 in %.2f s",
            self.what,
            self.path,
            files,
            time.perf_counter() - started,
        )

    def read(self) -> DataFrame:
        with self.damage_named():
            return self.spark.read.format("delta").load(self.path)

    def rows(self, **equals: str | int) -> list[dict[str, Any]]:
        """Every row whose columns equal ``equals`` (the filter is pushed down), as dicts."""
        frame = self.read()
        for column, value in equals.items():
            frame = frame.where(F.col(column) == value)
        with self.damage_named():
            return [r.asDict() for r in frame.collect()]

    def columns(self, names: list[str], **equals: str | int) -> list[list[Any]]:
        """The values of columns ``names`` (one list each) of the rows whose columns equal
        ``equals``: for tables with many rows, where building a dict per row would cost more."""
        frame = self.read()
        for column, value in equals.items():
            frame = frame.where(F.col(column) == value)
        with self.damage_named():
            rows = frame.select(*names).collect()
        return [[r[i] for r in rows] for i in range(len(names))]


class RustMetaTable(MetaTable):
    """The same table read and appended to with delta-rs: no Spark job, no JVM round trip. Times
    are naive UTC in and out, as :class:`MetaTable` keeps them. ``options``: delta-rs's storage
    options on an object store (:meth:`engine.spec.app.StorageConf.store_options`; default: the
    environment's settings)."""

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        ddl: str,
        *,
        version: int,
        what: str,
        options: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(spark, path, ddl, version=version, what=what)
        self.local = local_path(path) or path
        """Where delta-rs opens it: the local path, or the object store's URL."""
        self.options = rust_options(path, options)
        self._handle: Any = None
        self._prefetched: Future[Any] | None = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        """The table, opened once (its log read up to the newest checkpoint); None if missing.
        Call with the lock held. Takes the handle :meth:`prefetch` opened, if it got one."""
        if self._handle is None and self._prefetched is not None:
            pending, self._prefetched = self._prefetched, None
            try:
                self._handle = pending.result()
            except BaseException:  # (a pyo3 panic too) opened again below, so the error names the call
                self._handle = None
        if self._handle is None:
            from deltalake import DeltaTable as RustTable
            from deltalake.exceptions import TableNotFoundError

            try:
                with self.damage_named():
                    self._handle = RustTable(self.local, storage_options=self.options)
            except TableNotFoundError:
                return None
        return self._handle

    def prefetch(self) -> None:
        """Start opening the table on a thread of its own and return at once: the first call
        that needs it takes the handle (or, if the table was missing or the open failed, opens
        it again then). An open reads the log from disk and a run uses several tables: opened
        meanwhile, they cost its planning nothing."""
        if self._handle is not None or self._prefetched is not None:
            return
        pending: Future[Any] = Future()

        def open_() -> None:
            from deltalake import DeltaTable as RustTable

            try:
                pending.set_result(RustTable(self.local, storage_options=self.options))
            except BaseException as exc:  # handed to the caller of _open
                pending.set_exception(exc)

        self._prefetched = pending
        threading.Thread(
            target=open_, name=f"metadata-open-{self.local.rstrip('/').rsplit('/', 1)[-1]}", daemon=True
        ).start()

    def ensure(self, properties: dict[str, str] | None = None) -> MetaTable:
        """Create the table if missing by writing its first commit (what Spark's table builder
        writes, without its seconds of Spark work per table on a first run); the first of
        several creators at once wins, as with Delta's own put-if-absent, and all check its table."""
        if self.exists():
            return self.check()
        configuration = {VERSION_PROPERTY: str(self.version), **(properties or {})}
        if local_path(self.path) is not None:
            first_commit(self.local, self.schema.json(), configuration)
        else:
            first_remote_commit(self.local, self.options, self.schema.json(), configuration)
        with self._lock:
            self._handle = None  # opened again, on the table as created (maybe by another job)
        self._checked = False
        return self.check()

    def exists(self) -> bool:
        with self._lock:
            return self._checked or self._open() is not None

    def _properties(self) -> dict[str, str]:
        """As of when the handle was opened or last read: a table's schema version and log epoch
        are set when it is created (reading the commits since would cost a log listing per table
        per run, five of them while ``ensure`` runs)."""
        with self._lock:
            table = self._open()
            if table is None:
                raise FileNotFoundError(f"no Delta table at {self.local}")
            return dict(table.metadata().configuration)

    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        import pyarrow as pa
        from deltalake import write_deltalake

        arrow = _arrow_schema(self.schema)  # (a table this class only reads may have other types)
        names = arrow.names
        listed = list(rows)
        if listed:
            data = pa.Table.from_pylist([{n: _aware(r[n]) for n in names} for r in listed], schema=arrow)

            def write() -> None:
                with self._lock:  # one writer per handle; other processes are Delta's concern
                    table = self._open()
                    if table is None:  # never create it here: it would lack engine.schema_version
                        raise FileNotFoundError(f"the {self.what} table {self.local} is gone; was it deleted?")
                    with self.damage_named():
                        write_deltalake(table, data, mode="append")

            retry_conflicts(write, what=f"appending to {self.what}")
            with self._lock:
                self._files = len(self._handle.file_uris())
                self._tidy_if_due()
        return len(listed)

    def _tidy(self) -> None:
        """Compact, delete files removed before the table's retention, then checkpoint, so the
        next process opens the table from one checkpoint and one file. Call with the lock held."""
        table = self._handle
        table.optimize.compact()
        table.vacuum(dry_run=False)
        table.create_checkpoint()
        self._files = len(table.file_uris())

    def rows(self, **equals: str | int) -> list[dict[str, Any]]:
        found = self._arrow(None, equals)
        return [{k: _naive(v) for k, v in row.items()} for row in found.to_pylist()] if found is not None else []

    def columns(self, names: list[str], **equals: str | int) -> list[list[Any]]:
        found = self._arrow(names, equals)
        return [found.column(n).to_pylist() if found is not None else [] for n in names]

    def _arrow(self, names: list[str] | None, equals: dict[str, str | int]) -> Any:
        """The rows whose columns equal ``equals`` as an Arrow table (``None``: no table)."""
        filters = [(column, "=", value) for column, value in equals.items()] or None
        with self._lock:
            table = self._open()
            if table is None:
                return None
            with self.damage_named():
                table.update_incremental()  # the commits since it was opened or last read
                return table.to_pyarrow_table(columns=names, filters=filters)


_COMMIT_DIRS = ("_staged_commits", "_commits")
"""Folders of the log that Delta may create empty with a table."""


def never_written(path: str) -> bool:
    """Whether the Delta table at ``path`` certainly holds no rows: a local table whose log is
    its creating commit alone, adding no file. ``False`` when unsure (not local, a later commit or
    a checkpoint, a log that cannot be read): the caller then reads the table."""
    local = local_path(path)
    if local is None:
        return False
    log_dir = os.path.join(local, "_delta_log")
    try:
        names = [n for n in os.listdir(log_dir) if not n.startswith(".") and not n.endswith(".crc")]
        staged = [n for n in names if n in _COMMIT_DIRS and os.path.isdir(os.path.join(log_dir, n))]
        if any(os.listdir(os.path.join(log_dir, n)) for n in staged):
            return False
        if sorted(set(names) - set(staged)) != [f"{0:020d}.json"]:
            return False
        with open(os.path.join(log_dir, f"{0:020d}.json"), encoding="utf-8") as commit:
            return not any(json.loads(line).get("add") for line in commit if line.strip())
    except (OSError, ValueError, AttributeError):
        return False


_FLAT_TYPES = {
    "STRING": StringType(),
    "BIGINT": LongType(),
    "INT": IntegerType(),
    "DOUBLE": DoubleType(),
    "BOOLEAN": BooleanType(),
    "TIMESTAMP": TimestampType(),
}


def _flat_type(text: str) -> DataType | None:
    """``STRING``, ``BIGINT``, ... or an ``ARRAY<>`` of one, as Spark's parser reads it; else None."""
    kind = text.upper()
    if kind.startswith("ARRAY<") and kind.endswith(">"):
        inner = _FLAT_TYPES.get(kind[len("ARRAY<") : -1])
        return ArrayType(inner, True) if inner is not None else None
    return _FLAT_TYPES.get(kind)


@lru_cache(maxsize=64)
def _schema(ddl: str) -> StructType:
    """A DDL parsed once per process. The metadata tables' flat DDLs (``name TYPE, ...``) are
    parsed here, as Spark would (nullable, no metadata): Spark's parser is a JVM round trip and,
    on a fresh JVM, most of a second. Anything else goes to Spark."""
    fields = [
        (f[0], _flat_type(f[1])) if len(f) == 2 and f[0].isidentifier() else ("", None)
        for f in (part.split() for part in ddl.split(","))
    ]
    if all(kind is not None for _, kind in fields):
        return StructType([StructField(name, kind, True) for name, kind in fields])  # type: ignore[arg-type]
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def _quoted(path: str) -> str:
    """``path`` as a Delta table identifier in Spark SQL."""
    return "delta.`" + path.replace("`", "``") + "`"


def meta_table(
    spark: SparkSession,
    path: str,
    ddl: str,
    *,
    version: int,
    what: str,
    backend: str = AUTO,
    options: Mapping[str, str] | None = None,
) -> MetaTable:
    """The metadata table at ``path``, reached the way ``backend`` says (:mod:`engine.state.backends`);
    ``options``: delta-rs's storage options on an object store (default: the environment's)."""
    if backend == "delta_rs" or (backend == AUTO and (local_path(path) is not None or scheme(path) in RUST_SCHEMES)):
        return RustMetaTable(spark, path, ddl, version=version, what=what, options=options)
    return MetaTable(spark, path, ddl, version=version, what=what)


def rust_options(path: str, options: Mapping[str, str] | None) -> dict[str, str]:
    """delta-rs's storage options of ``path``: ``options`` (else the environment's), and on S3 a
    conditional put (``If-None-Match``) for each commit, so no commit replaces another."""
    found = dict(store_options(path) if options is None else options)
    if scheme(path) in RUST_SCHEMES:
        found.setdefault("conditional_put", "etag")
    return found


def prefetch(tables: Iterable[MetaTable]) -> None:
    """Start opening the delta-rs tables among ``tables`` (see :meth:`RustMetaTable.prefetch`)."""
    for table in tables:
        if isinstance(table, RustMetaTable):
            table.prefetch()


_ARROW_TYPES = {
    "string": "string",
    "long": "int64",
    "integer": "int32",
    "double": "float64",
    "boolean": "bool_",
}


@lru_cache(maxsize=64)
def _arrow_schema(schema: StructType) -> Any:
    import pyarrow as pa

    fields = []
    for field in schema.fields:
        name = field.dataType.typeName()
        if name == "timestamp":
            kind = pa.timestamp("us", tz="UTC")
        elif name in _ARROW_TYPES:
            kind = getattr(pa, _ARROW_TYPES[name])()
        else:
            raise TypeError(f"metadata column {field.name}: {name} has no delta-rs mapping here")
        fields.append(pa.field(field.name, kind))
    return pa.schema(fields)


def _aware(value: Any) -> Any:
    """A naive datetime as PySpark stores it: read as the process's local time (``time.mktime``),
    so rows written by either path agree on any host (UTC hosts: unchanged)."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.astimezone(timezone.utc)
    return value


def _naive(value: Any) -> Any:
    """delta-rs gives UTC-aware datetimes; PySpark gives naive local ones (the engine runs in UTC)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value
