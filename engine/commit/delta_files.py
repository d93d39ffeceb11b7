"""A Delta batch staged by Delta's own writer and published as a commit of the files it wrote.

Every Delta write has two halves: Parquet files (with their statistics) written into the table's
directory, where no reader sees them, then one commit whose ``add`` actions make them the table's.
The engine splits the halves across its commit protocol: :func:`write_files` runs at staging and
returns the ``add`` actions; :func:`commit_files` commits them when the sequence runs, with the
batch's ``txn`` (Delta's ``txnAppId``/``txnVersion``), so a replay never commits them twice. The
batch is written once, not staged as Parquet and written again.

Only a plain write takes this way: ``append`` or ``overwrite`` with no writer options, of a branch
whose schema is the table's (or a new table's), without identity or generated columns or column
mapping. Anything else (``merge``, ``mergeSchema``, a changed schema) needs Delta's full writer:
:func:`write_files` answers ``None`` and the sink stages Parquet as before. If the table changed
between staging and publishing (created, dropped or altered by someone else), :func:`commit_files`
answers ``unfit`` and the step rewrites the staged files through Delta's writer instead.

Files written for a batch that is never published stay in the table's directory, unreferenced,
until ``VACUUM`` removes them: the same as any failed Delta write.

This uses Delta's transaction API through py4j (``DeltaLog``, ``OptimisticTransaction``), which
is not Delta's public Python API: ``tests/commit/test_delta_files.py`` pins its behaviour for the
Delta version the project pins.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

from engine.platform.jvm import java_class
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

INVALID_NAME_CHARS = set(" ,;{}()\n\t=")
"""Characters Delta refuses in a column name without column mapping."""
_UNFIT_FIELD_METADATA = ("delta.identity", "delta.generationExpression", "delta.columnMapping")

Outcome = Literal["committed", "held", "unfit"]
"""``held``: the table already has this app id at this batch or later (nothing committed)."""


@dataclass(frozen=True)
class WrittenFiles:
    """What :func:`write_files` wrote, as the commit sequence stores it (all JSON values)."""

    actions: list[str]
    """The ``add`` actions, as Delta's log writes them."""
    schema: str
    """The table schema the files were written for (Delta's ``schemaString``)."""
    table_id: str
    """The table's id when staged; empty when the batch creates the table."""
    metadata: str
    """The ``metaData`` action that creates the table; empty for an existing table."""
    partitions: list[str]
    """The table's partition columns the files were written for (their folders)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "actions": self.actions,
            "schema": self.schema,
            "table_id": self.table_id,
            "metadata": self.metadata,
            "partitions": self.partitions,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> WrittenFiles:
        return WrittenFiles(
            list(data["actions"]), data["schema"], data["table_id"], data["metadata"], list(data["partitions"])
        )

    def relative_paths(self) -> list[str]:
        """Each file's path under the table's directory (an action's path is URI-encoded)."""
        return [unquote(json.loads(a)["add"]["path"]) for a in self.actions]

    def paths(self, table: str) -> list[str]:
        """The absolute path of each file."""
        return [f"{table.rstrip('/')}/{rel}" for rel in self.relative_paths()]


class _Delta:
    """The few JVM classes this module uses, and Scala values built from Python ones."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self.jvm: Any = jvm
        self.jspark: Any = spark._jsparkSession  # type: ignore[attr-defined]
        self.pkg: Any = self.jvm.org.apache.spark.sql.delta

    def module(self, cls: Any) -> Any:
        return getattr(cls, "MODULE$")

    def cls(self, name: str) -> Any:
        return java_class(self.jvm, name)

    def seq(self, items: list[Any]) -> Any:
        java = self.cls("java.util.ArrayList")()
        for item in items:
            java.add(item)
        return self.cls("scala.jdk.javaapi.CollectionConverters").asScala(java).toList()

    def option(self, value: Any) -> Any:
        return self.cls("scala.Option").apply(value)

    def now(self) -> Any:
        return self.option(self.cls("java.lang.Long").valueOf(int(time.time() * 1000)))

    def transaction(self, table: str) -> Any:
        return self.pkg.DeltaLog.forTable(self.jspark, table).startTransaction()

    def forget(self, table: str) -> None:
        """Drop Delta's cached log of ``table`` (a scratch directory that is gone)."""
        self.module(getattr(self.pkg, "DeltaLog$")).invalidateCache(
            self.jspark, self.cls("org.apache.hadoop.fs.Path")(table)
        )

    def action(self, text: str) -> Any:
        return self.module(getattr(self.pkg.actions, "Action$")).fromJson(text)

    def new_metadata(self, schema: str, partition_by: list[str]) -> Any:
        meta = self.module(getattr(self.pkg.actions, "Metadata$"))
        return meta.apply(
            str(uuid.uuid4()),
            None,
            None,
            getattr(meta, "apply$default$4")(),  # format: Parquet
            schema,
            self.seq(partition_by),
            getattr(meta, "apply$default$7")(),  # configuration: none (Delta adds its session defaults)
            self.now(),
        )


def _nullable(field_type: Any) -> Any:
    """A schema (as JSON) with every field, element and value nullable, as Delta stores it."""
    if not isinstance(field_type, dict):
        return field_type
    out = dict(field_type)
    kind = out.get("type")
    if kind == "struct":
        out["fields"] = [{**f, "nullable": True, "type": _nullable(f["type"])} for f in out["fields"]]
    elif kind == "array":
        out.update(containsNull=True, elementType=_nullable(out["elementType"]))
    elif kind == "map":
        out.update(valueContainsNull=True, keyType=_nullable(out["keyType"]), valueType=_nullable(out["valueType"]))
    return out


def staged_schema(df: DataFrame) -> str:
    """``df``'s schema as Spark's Parquet writer stores it (every field nullable), as JSON: kept in
    a commit step so that reading the staged files back needs no Spark job to infer it."""
    return json.dumps(_nullable(json.loads(df.schema.json())), separators=(",", ":"))


def read_staged(spark: SparkSession, staging: str, schema: str = "") -> DataFrame:
    """The Parquet staged at ``staging``, read with ``schema`` (:func:`staged_schema`) if the step
    kept it, else with the schema of its files (one Spark job: a step written by an older engine)."""
    if not schema:
        return spark.read.parquet(staging)
    from pyspark.sql.types import StructType

    return spark.read.schema(StructType.fromJson(json.loads(schema))).parquet(staging)


def _shape(field_type: Any) -> Any:
    """A schema (as JSON) reduced to names and types: what must match for files to fit a table."""
    if not isinstance(field_type, dict):
        return field_type
    kind = field_type.get("type")
    if kind == "struct":
        return [(f["name"], _shape(f["type"])) for f in field_type["fields"]]
    if kind == "array":
        return ("array", _shape(field_type["elementType"]))
    if kind == "map":
        return ("map", _shape(field_type["keyType"]), _shape(field_type["valueType"]))
    return field_type


def _bad_name(schema: Any) -> str | None:
    """A (nested) column name Delta refuses without column mapping, or that carries field metadata
    Delta may act on (char/varchar, comments): left to Delta's full writer."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "struct":
        for f in schema["fields"]:
            if INVALID_NAME_CHARS & set(f["name"]) or f.get("metadata"):
                return str(f["name"])
            if (inner := _bad_name(f["type"])) is not None:
                return f"{f['name']}.{inner}"
        return None
    if kind == "array":
        return _bad_name(schema["elementType"])
    if kind == "map":
        return _bad_name(schema["keyType"]) or _bad_name(schema["valueType"])
    return None


def _misfit(metadata: Any, schema: dict[str, Any], partition_by: list[str]) -> str | None:
    """Why files of ``schema`` cannot be added to the table of ``metadata`` as they are, if so."""
    table_schema = metadata.schemaString()
    if _scala_map(metadata.configuration()).get("delta.columnMapping.mode", "none") != "none":
        return "the table maps its column names"
    if any(m in table_schema for m in _UNFIT_FIELD_METADATA):
        return "the table has identity or generated columns"
    partitions = _scala_list(metadata.partitionColumns())
    if partition_by and partitions != partition_by:
        return f"the table is partitioned by {partitions}"
    if _shape(json.loads(table_schema)) != _shape(schema):
        return "the branch's columns are not the table's (names, order, types)"
    return None


def _scala_list(seq: Any) -> list[Any]:
    out, it = [], seq.iterator()
    while it.hasNext():
        out.append(it.next())
    return out


def _scala_map(m: Any) -> dict[str, str]:
    return {str(kv._1()): str(kv._2()) for kv in _scala_list(m.toList())}


def table_schema(
    spark: SparkSession, table: str, fs: HadoopFs | None = None, *, version: int | None = None
) -> StructType | None:
    """``table``'s columns as its latest version says, ``None`` when there is no table yet (a
    listing, not a log read, unless the caller listed it: ``version``); the log read is Delta's
    cached snapshot, which the write reuses."""
    from pyspark.sql.types import StructType

    if (version if version is not None else (fs or HadoopFs(spark)).delta_version(table)) < 0:
        return None
    schema = _Delta(spark).transaction(table).metadata().schemaString()
    return StructType.fromJson(json.loads(str(schema)))


def write_files(
    df: DataFrame,
    table: str,
    partition_by: list[str],
    *,
    mode: str,
    options: dict[str, str],
    scratch: str | None = None,
) -> WrittenFiles | None:
    """Write ``df``'s files into ``table``'s directory with Delta's writer, uncommitted; ``None``
    when this write needs Delta's full writer (see the module's docstring; the log says why).

    With ``scratch`` (a directory of the batch's own) the files are written there first and moved
    into the table's directory only once every one is written: a write that fails leaves nothing
    in the table's directory (Delta's writer leaves the files of the tasks that finished), and
    ``scratch`` is removed either way."""
    schema = _nullable(json.loads(df.schema.json()))
    why = _needs_full_writer(schema, partition_by, mode=mode, options=options)
    if why is not None:
        log.info("%s: staged as Parquet for Delta's writer: %s", table, why)
        return None
    delta = _Delta(df.sparkSession)
    txn = delta.transaction(table)
    new = txn.readVersion() < 0
    if new:
        txn.updateMetadataForNewTable(delta.new_metadata(json.dumps(schema, separators=(",", ":")), partition_by))
    else:  # Delta's writer matches columns by name: so does this one
        ordered = _in_table_order(df, json.loads(txn.metadata().schemaString()))
        if ordered is not df:
            df, schema = ordered, _nullable(json.loads(ordered.schema.json()))
    why = _misfit(txn.metadata(), schema, partition_by)
    if why is not None:  # (a new table: the session's defaults turned on column mapping, ...)
        log.info("%s: staged as Parquet for Delta's writer: %s", table, why)
        return None
    actions = (
        _written(delta, txn, df, table, scratch)
        if scratch
        else [a.json() for a in _scala_list(txn.writeFiles(df._jdf))]
    )
    meta = txn.metadata()
    partitions = [str(c) for c in _scala_list(meta.partitionColumns())]
    table_id, metadata = ("", meta.json()) if new else (str(meta.id()), "")
    return WrittenFiles(actions, str(meta.schemaString()), table_id, metadata, partitions)


def _written(delta: _Delta, txn: Any, df: DataFrame, table: str, scratch: str) -> list[str]:
    """The ``add`` actions of ``df``'s files, written by Delta's writer under ``scratch`` (for
    ``txn``'s table, as ``txn``'s metadata says) then moved to the same place under ``table``."""
    fs = HadoopFs(df.sparkSession)
    fs.delete(scratch, recursive=True)  # what a killed attempt left
    existed = fs.exists(table)
    try:
        writer = delta.transaction(scratch)  # never committed: it only lays the files out
        writer.updateMetadataForNewTable(txn.metadata())
        actions = [a.json() for a in _scala_list(writer.writeFiles(df._jdf))]
        for rel in WrittenFiles(actions, "", "", "", []).relative_paths():
            fs.rename(f"{scratch}/{rel}", f"{table.rstrip('/')}/{rel}")
    finally:
        fs.delete(scratch, recursive=True)
        fs.delete_if_empty(scratch.rstrip("/").rsplit("/", 1)[0])  # the staging root
        if not existed:
            fs.delete_if_empty(table)  # made for the scratch, and nothing was moved there
        delta.forget(scratch)
    return actions


def _in_table_order(df: DataFrame, table_schema: dict[str, Any]) -> DataFrame:
    """``df`` with its columns in the table's order, if they are the table's columns."""
    names = [f["name"] for f in table_schema["fields"]]
    if names == df.columns or sorted(names) != sorted(df.columns):
        return df
    return df.select(*[f"`{n}`" for n in names])


def _needs_full_writer(
    schema: dict[str, Any], partition_by: list[str], *, mode: str, options: dict[str, str]
) -> str | None:
    """Why this write needs Delta's full writer, as far as the branch's ``schema`` tells."""
    if mode not in ("append", "overwrite"):
        return f"mode {mode}"
    if options:
        return f"writer options ({', '.join(sorted(options))})"
    if (name := _bad_name(schema)) is not None:
        return f"column `{name}`"
    if any(_is_complex(schema, c) for c in partition_by):
        return "a partition column of a complex type"
    return None


def _is_complex(schema: dict[str, Any], column: str) -> bool:
    return any(f["name"] == column and isinstance(f["type"], dict) for f in schema["fields"])


def commit_files(
    spark: SparkSession,
    table: str,
    written: WrittenFiles,
    *,
    mode: str,
    app_id: str,
    batch: int,
    partition_by: list[str],
    user_metadata: str,
) -> Outcome:
    """Commit ``written``'s files to ``table`` as one Delta commit carrying ``txn(app_id, batch)``
    (``overwrite`` also removes every file the table had). ``unfit``: the table is no longer the
    one the files were written for; nothing was committed."""
    delta = _Delta(spark)
    txn = delta.transaction(table)
    if txn.readVersion() >= 0 and _txn_version(txn, app_id) >= batch:
        return "held"
    if txn.readVersion() < 0:
        if not written.metadata:
            return "unfit"  # staged for a table that was dropped since
        txn.updateMetadataForNewTable(delta.action(written.metadata))
    elif (
        json.loads(txn.metadata().schemaString()) != json.loads(written.schema)
        or _scala_list(txn.metadata().partitionColumns()) != written.partitions
        or (written.table_id and str(txn.metadata().id()) != written.table_id)
    ):
        return "unfit"
    actions = [delta.action(a) for a in written.actions]
    if mode == "overwrite" and txn.readVersion() >= 0:
        actions += [f.remove() for f in _scala_list(txn.filterFiles())]
    actions.append(delta.pkg.actions.SetTransaction(app_id, batch, delta.now()))
    save_mode = delta.cls("org.apache.spark.sql.SaveMode")
    none = delta.option(None)
    operation = getattr(delta.pkg, "DeltaOperations$Write")(
        save_mode.Overwrite if mode == "overwrite" else save_mode.Append,
        delta.option(delta.seq(partition_by)) if partition_by else none,
        none,
        delta.option(user_metadata or None),
        none,
        none,
        none,
        none,
        none,
    )
    txn.commit(delta.seq(actions), operation)
    return "committed"


def commit_or_rewrite(
    spark: SparkSession,
    fs: HadoopFs,
    table: str,
    written: WrittenFiles,
    *,
    rewrite: Callable[[DataFrame], None],
    mode: str,
    app_id: str,
    batch: int,
    partition_by: list[str],
    user_metadata: str,
) -> Outcome:
    """:func:`commit_files`, and when the table no longer fits the files (``unfit``): their rows
    handed to ``rewrite`` (Delta's writer with the batch's txn, which applies its schema rules to
    the change), then the files deleted."""
    outcome = commit_files(
        spark,
        table,
        written,
        mode=mode,
        app_id=app_id,
        batch=batch,
        partition_by=partition_by,
        user_metadata=user_metadata,
    )
    if outcome == "unfit":
        log.warning("%s changed since batch %d was staged; writing it again", table, batch)
        rewrite(read_written(spark, table, written))
        for path in written.paths(table):
            fs.delete(path)
    return outcome


def read_listed(spark: SparkSession, table: str) -> DataFrame | None:
    """The current rows of a small engine-kept Delta table read as the Parquet files its latest
    checksum file lists, with its schema: no Spark job to build the table's state from its log,
    which reading it as Delta runs in every process (~0.3 s). Delta lists a version's files in
    its checksum below ``allFilesInCrc.thresholdNumFiles`` files (50). ``None`` (read it as
    Delta) where it does not, or where a file needs more than Parquet to read: deletion vectors,
    partition folders, column mapping; or a path Spark would read as a glob pattern."""
    from pyspark.sql.types import StructType

    snapshot = _Delta(spark).transaction(table).snapshot()
    checksum = snapshot.checksumOpt()
    listed = checksum.get().allFiles() if checksum.isDefined() else None
    if listed is None or not listed.isDefined() or snapshot.version() < 0:
        return None
    metadata = snapshot.metadata()
    if _scala_list(metadata.partitionColumns()) or "delta.columnMapping.mode" in _scala_map(metadata.configuration()):
        return None
    adds = _scala_list(listed.get())
    if any(add.deletionVector() is not None for add in adds):
        return None
    schema = StructType.fromJson(json.loads(metadata.schemaString()))
    paths = [_absolute(table, unquote(str(add.path()))) for add in adds]
    if any(c in path for path in paths for c in _GLOB):  # Spark would take the path for a pattern
        return None
    if not paths:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*paths)


def read_kept(spark: SparkSession, table: str) -> DataFrame:
    """The current rows of an engine-kept Delta table: as :func:`read_listed` reads them where it
    can, else as Delta."""
    listed = read_listed(spark, table)
    return listed if listed is not None else spark.read.format("delta").load(table)


_GLOB = "*?[]{}\\"
"""What Hadoop's glob patterns make of a path that ``spark.read.parquet`` is given."""


def _absolute(table: str, path: str) -> str:
    """An ``add`` action's path made absolute: relative ones are under the table's directory."""
    return path if urlparse(path).scheme or path.startswith("/") else f"{table.rstrip('/')}/{path}"


def transaction_version(spark: SparkSession, table: str, app_id: str) -> int:
    """The latest version the table's ``txn`` actions record for ``app_id`` (-1: none), as Delta's
    own library reads the log: checkpoints, checksums and log cleanup included, with the Hadoop
    settings and credentials Spark writes the table with."""
    return _txn_version(_Delta(spark).transaction(table), app_id)


def _txn_version(txn: Any, app_id: str) -> int:
    """``txn.txnVersion(app_id)``, from the checksum file of the version ``txn`` read when that file
    lists the table's transactions (Delta writes them there), else from Delta's state of the table.

    Delta's ``txnVersion`` always builds that state: two Spark jobs over the log (~0.9 s a commit on
    a warm JVM, more on a cold one), which the checksum file makes unneeded. Like ``txnVersion``,
    this registers ``app_id`` as read, so a concurrent commit of the same application conflicts."""
    txn.readTxn().addOne(app_id)
    checksum = txn.snapshot().checksumOpt()
    known = checksum.get().setTransactions() if checksum.isDefined() else None
    if known is None or not known.isDefined():
        return int(txn.txnVersion(app_id))
    versions = [int(t.version()) for t in _scala_list(known.get()) if str(t.appId()) == app_id]
    return max(versions, default=-1)


def read_written(spark: SparkSession, table: str, written: WrittenFiles) -> DataFrame:
    """The staged files as one frame (partition columns from their folders), for a rewrite."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(written.schema))
    paths = written.paths(table)
    if not paths:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", table).parquet(*paths)
