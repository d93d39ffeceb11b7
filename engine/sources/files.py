"""Files on any Hadoop file system, read by Spark's built-in formats, incrementally.

What a run reads is planned in :mod:`engine.sources.file_planning` (new files by the file log, or
date partitions) over what :mod:`engine.sources.file_listing` found; this module reads it: the
schema (declared, pinned or inferred), the records with their dataset URN, and the files that
cannot be read (skipped when ``on_corrupt = skip``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from engine.columns import DATASET, FILE
from engine.errors import ConfigError, JobFailedError
from engine.sources.appended import COMPRESSED, line_oriented, tail_copy
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, LoggedFile, PlanContext, Source
from engine.sources.conf import FilesSourceConf
from engine.sources.corrupt_files import SkippedFiles, is_file_error, why
from engine.sources.csv_headers import Headers, by_name, header_line, header_schema, missing_columns, reads_by_name
from engine.sources.drift import HEAD_BYTES, drift
from engine.sources.file_listing import GLOB, SCHEME, FileEntry, bare, directory_prefix
from engine.sources.file_planning import FilePlanner
from engine.sources.record_errors import corrupt_reason
from engine.sources.workunits import WorkUnit
from engine.storage.hadoop import HadoopFs
from engine.storage.options import local_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession

log = logging.getLogger(__name__)

DRIFT_LOOKS = 16
"""At most this many units of a run are looked at for drift (the newest files first)."""
_KEEPS_CORRUPT = ("json", "csv")

__all__ = ["FileEntry", "FilesSource"]
"""``FileEntry`` stays importable from here, where plans stored before the split name it."""


class FilesSource(Source):
    """See :class:`~engine.sources.conf.FilesSourceConf` for its config."""

    Conf = FilesSourceConf
    conf: FilesSourceConf

    def __init__(self, conf: FilesSourceConf, *, name: str, key: str, schema_ddl: str | None) -> None:
        super().__init__(conf, name=name, key=key, schema_ddl=schema_ddl)
        self._skipped = SkippedFiles()
        self._headers = Headers(conf.options) if conf.format == "csv" and reads_by_name(conf.options) else None
        """The headers of this run's CSV files that are not the schema's (``None``: not read by name)."""
        self._fs: HadoopFs | None = None
        self._data_columns: list[str] = []

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        fs = HadoopFs(spark)
        for path in (p for p in self.conf.paths() if p not in not_yet):
            # A glob that matches nothing yet is fine (nothing new); its fixed prefix must exist.
            probe = path if not GLOB.search(path) else directory_prefix(path)
            if not fs.exists(probe):
                raise ConfigError(f"input path does not exist: {probe}", key=f"{self.key}.path")
        if self.conf.incremental == "partitions" and self.conf.partitions is None:
            raise ConfigError("`incremental = partitions` needs a `partitions { pattern = ... }` block", key=self.key)
        if self.conf.backfill and self.conf.incremental == "none":
            raise ConfigError("a backfill range (`from`/`to`) needs an incremental source", key=f"{self.key}.from")

    # -- planning ------------------------------------------------------------------------------

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        return FilePlanner(self.conf, key=self.key).plan(spark, ctx)

    def files_read(self, unit: WorkUnit) -> list[LoggedFile]:
        """The files read, and those skipped as unreadable (logged with why, so not read again)."""
        if self.conf.incremental != "new_files" or unit.empty:
            return []
        skipped = [(f.path, f.mtime_ms, f.size, f"skipped: {why}") for f, why in self._skipped.of(unit.dataset)]
        return [(f.path, f.mtime_ms, f.size, "") for f in unit.payload] + skipped

    # -- reading -------------------------------------------------------------------------------

    def schema(
        self, spark: SparkSession, units: list[WorkUnit] | None, ctx: PlanContext | None = None
    ) -> StructType | None:
        """The declared schema; else, for JSON and CSV, the one inferred from the first files read
        and pinned (``ctx``) so every later run reads with the same types; else inferred now."""
        declared = self.declared_schema()
        if declared is not None:
            return declared.add(CORRUPT_RECORD, "string") if self.conf.format in _KEEPS_CORRUPT else declared
        if ctx is None or self.conf.format not in _KEEPS_CORRUPT:
            return self._infer(spark, units)
        fingerprint = self.schema_fingerprint()
        pinned = ctx.pinned_schema()
        if pinned is not None and pinned.fingerprint == fingerprint:
            if units:
                self._report_drift(spark, units, _ddl_schema(pinned.ddl).fieldNames())
            return _ddl_schema(self._with_corrupt(pinned.ddl))
        inferred = self._infer(spark, units)
        if inferred is None:
            return None
        if pinned is not None:
            log.warning("%s: its format or reader options changed: the schema is inferred and pinned again", self.key)
        data = StructType([f for f in inferred.fields if f.name != CORRUPT_RECORD])
        ctx.pin_schema(fingerprint, data.toDDL())
        return _ddl_schema(self._with_corrupt(data.toDDL()))

    def _report_drift(self, spark: SparkSession, units: list[WorkUnit], columns: list[str]) -> None:
        """Look at the newest file of each unit for what the pinned ``columns`` do not read
        (:mod:`engine.sources.drift`); note it on the unit and warn. A source with many datasets
        has the :data:`DRIFT_LOOKS` units with the newest files looked at: one open file each."""
        fs = HadoopFs(spark)
        options = {k: str(v) for k, v in self.conf.options.items()}
        newest_of = {
            id(u): max(files, key=lambda f: f.position)
            for u in units
            if not u.empty and (files := [f for f in (u.payload or []) if isinstance(f, FileEntry)])
        }
        looked = sorted(newest_of, key=lambda u: newest_of[u].position, reverse=True)[:DRIFT_LOOKS]
        for unit in [u for u in units if id(u) in looked]:
            newest = newest_of[id(unit)]
            try:
                head = fs.head(newest.path, HEAD_BYTES)
            except Exception as exc:  # the read itself will say what is wrong with the file
                log.debug("%s: no look at %s for drift: %s", self.key, newest.path, exc)
                continue
            found = drift(self.conf.format, head, columns, options, whole=len(head) < HEAD_BYTES)
            if found:
                said = f"schema drift in {newest.path}: {found} (declare {self.key}.schema to read them)"
                log.warning("%s: %s", unit.dataset, said)
                unit.note = "; ".join(n for n in (unit.note, said) if n)

    def _infer(self, spark: SparkSession, units: list[WorkUnit] | None) -> StructType | None:
        if units is None:
            paths = self.conf.paths()
        else:
            paths = [f.path for u in units if not u.empty for f in u.payload]
            if not paths:
                return None
        reader = self._reader(spark)
        if self.conf.format == "csv" and "inferSchema" not in self.conf.options:
            reader = reader.option("inferSchema", "true")  # else every column is a STRING
        try:
            schema: StructType = reader.load(paths).schema
        except Exception as exc:  # inferring reads files too: a broken Parquet footer fails here
            if units is not None and self.skip_unreadable(exc, units):
                return self._infer(spark, units)
            hint = self.read_hint(exc)
            if hint:
                raise JobFailedError(f"{self.key}: inferring the schema failed: {why(exc)}{hint}") from exc
            raise
        return schema

    def schema_fingerprint(self) -> str:
        """What an inferred schema depends on besides the data: the format and the reader options."""
        text = json.dumps([self.conf.format, {k: str(v) for k, v in self.conf.options.items()}], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        work = [u for u in units if not u.empty and u.payload]  # a unit may have lost all its files
        copies = {f.path for u in work for f in u.payload if self._copied(f)}  # once: a file growing on gets one answer
        self._fs, self._data_columns = HadoopFs(spark), [n for n in schema.fieldNames() if n != CORRUPT_RECORD]
        apart = {f.path for u in work for f in u.payload if self._by_header(f)} | copies
        whole = [replace(u, payload=own) for u in work if (own := [f for f in u.payload if f.path not in apart])]
        frames = [self._with_reasons(self._read_units(spark, whole, schema), schema)] if whole else []
        frames += self._read_by_headers(spark, work, schema, copies)
        tails = self._read_tails(spark, work, schema, copies)
        if tails:  # each record of a copied tail names the file it was appended to, the others theirs
            frames = [f.withColumn(FILE, F.input_file_name()) for f in frames] + tails
        if not frames:
            frames = [spark.createDataFrame([], schema).withColumn(DATASET, F.lit(None).cast("string"))]
        frame = reduce(lambda a, b: a.unionByName(b), frames)
        return self._skipped.with_error_rows(spark, frame, units)

    def _copied(self, entry: FileEntry) -> bool:
        """Whether ``entry`` is read as a copy of its planned bytes (from its ``offset`` to its
        planned size): appended to since a run read it, or grown since this run planned (a local
        file of lines still written to: read whole, Spark would read the lines that came after the
        size the file log records, and the next run would read them again). A scratch folder to
        copy them to is needed; without one the file is read whole."""
        return self.scratch is not None and (entry.offset > 0 or self._grew(entry))

    def _grew(self, entry: FileEntry) -> bool:
        """Whether a local file of lines holds more bytes now than when the run planned."""
        local = local_path(entry.path)
        if local is None or not line_oriented(self.conf) or entry.path.lower().endswith(COMPRESSED):
            return False
        try:
            return os.stat(local).st_size > entry.size
        except OSError:  # gone: the read says so
            return False

    def _read_tails(
        self, spark: SparkSession, work: list[WorkUnit], schema: StructType, copies: set[str]
    ) -> list[DataFrame]:
        """The new bytes of each file appended to since a run read it, or that grew since the plan
        (:mod:`engine.sources.appended`), copied to the scratch folder and read from there, each
        record naming its file and the byte the bytes read start at (``<file>#<offset>``: a record
        id of the file's first read is not taken again by an equal line of its tail)."""
        assert self._fs is not None
        frames = []
        for u in work:
            for f in u.payload:
                if f.path not in copies:
                    continue
                assert self.scratch is not None
                copy = tail_copy(self._fs, self.conf, f, self.scratch)
                self.scratch_used = True
                named = self._fs.input_file_name(f.path) + (f"#{f.offset}" if f.offset else "")
                header = self._by_header(f)
                if header is None:
                    read = self._with_reasons(self._reader(spark).schema(schema).load([copy]), schema)
                else:
                    read = self._by_its_header(spark, [copy], header, schema, shown=F.lit(f.path))
                frames.append(read.withColumn(DATASET, F.lit(u.dataset)).withColumn(FILE, F.lit(named)))
                log.info("%s: read bytes %d..%d of %s", self.key, f.offset, f.size, f.path)
        return frames

    def _by_its_header(
        self, spark: SparkSession, paths: list[str], header: list[str], schema: StructType, *, shown: Column
    ) -> DataFrame:
        """``paths``, files whose header is ``header``, read by it (:mod:`engine.sources.csv_headers`);
        if it lacks one of the schema's columns, their records rejected, the reason naming the file
        (``shown``) and the columns: a renamed column is not read as nulls."""
        missing = missing_columns(header, self._data_columns)
        if missing:
            return self._refused_by_header(spark, paths, header, missing, schema, shown=shown)
        read_with = header_schema(paths[0], header, schema, corrupt=CORRUPT_RECORD)
        raw = self._reader(spark).option("enforceSchema", "true").schema(read_with).load(paths)
        return by_name(self._with_reasons(raw, read_with), schema, keep=(CORRUPT_REASON,))

    def _refused_by_header(
        self,
        spark: SparkSession,
        paths: list[str],
        header: list[str],
        missing: list[str],
        schema: StructType,
        *,
        shown: Column,
    ) -> DataFrame:
        """Each line of ``paths`` but the header, rejected by the ``read`` step with its text."""
        assert self._fs is not None
        first = header_line(self._fs, paths[0]).decode("utf-8", errors="replace").rstrip("\r\n")
        lines = spark.read.text(paths).where((F.col("value") != first) & (F.trim(F.col("value")) != ""))
        names = ", ".join(f"`{c}`" for c in missing)
        why = F.concat(
            F.lit("the header of "),
            shown,
            F.lit(
                f" has no column(s) {names} of the schema (its columns: {', '.join(h.strip() for h in header)}): its "
                "records are not read with nulls there; declare a schema of its columns, or set the source's "
                "options.enforceSchema = true to read its columns by position"
            ),
        )
        data = [F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields if f.name != CORRUPT_RECORD]
        log.warning("%s: %s lack(s) the schema's column(s) %s: its records are rejected", self.key, paths[0], names)
        return lines.select(*data, F.col("value").alias(CORRUPT_RECORD), why.alias(CORRUPT_REASON))

    def _read_units(self, spark: SparkSession, work: list[WorkUnit], schema: StructType) -> DataFrame:
        """The records of ``work``'s files, each with its dataset URN."""
        if self.conf.datasets == "directory" and self.conf.incremental != "partitions":
            return self._read_directories(spark, work, schema)
        frames = [
            self._reader(spark).schema(schema).load([f.path for f in u.payload]).withColumn(DATASET, F.lit(u.dataset))
            for u in work
        ]
        return reduce(lambda a, b: a.unionByName(b), frames)

    def _by_header(self, entry: FileEntry) -> list[str] | None:
        """The header of a CSV file whose header is not the schema's (read by it), if one was learned."""
        return self._headers.of(entry.path) if self._headers is not None else None

    def _read_by_headers(
        self, spark: SparkSession, work: list[WorkUnit], schema: StructType, copies: set[str]
    ) -> list[DataFrame]:
        """The files of ``work`` whose header is not the schema's, each group of one dataset and one
        header read by it (:mod:`engine.sources.csv_headers`)."""
        groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for u in work:
            for f in u.payload:
                if (header := self._by_header(f)) is not None and f.path not in copies:
                    groups.setdefault((u.dataset, tuple(header)), []).append(f.path)
        frames = []
        for (dataset, names), paths in groups.items():
            read = self._by_its_header(spark, paths, list(names), schema, shown=F.input_file_name())
            frames.append(read.withColumn(DATASET, F.lit(dataset)))
            log.info(
                "%s: %d file(s) of %s read by their header's names: %s",
                self.key,
                len(paths),
                dataset,
                ", ".join(names),
            )
        return frames

    def skip_unreadable(self, error: BaseException, units: list[WorkUnit]) -> bool:
        """Whether the group of ``units`` can be read again after ``error``: its CSV files' headers
        were learned (they read by name now), or, with ``on_corrupt = skip``, the files it names
        were taken out."""
        fs = self._fs
        if self._headers is not None and fs is not None and self._headers.learn(error, units, fs, self._data_columns):
            return True
        return self.conf.on_corrupt == "skip" and self._skipped.drop(error, units)

    def read_hint(self, error: BaseException) -> str:
        if self.conf.on_corrupt == "skip" or not is_file_error(error):
            return ""
        return (
            f". A file that cannot be read fails its dataset on every run: fix or remove it, or set "
            f"`{self.key}.on_corrupt = skip` to skip it (it then goes to the error table and the file log, "
            "and is read again only once replaced)"
        )

    def _with_reasons(self, frame: DataFrame, schema: StructType) -> DataFrame:
        """Say which column of a corrupt JSON/CSV record did not fit, and why (corrupt records only)."""
        if self.conf.format not in _KEEPS_CORRUPT or CORRUPT_RECORD not in schema.fieldNames():
            return frame
        options = {k: str(v) for k, v in self.conf.options.items()}
        return frame.withColumn(CORRUPT_REASON, corrupt_reason(self.conf.format, schema, CORRUPT_RECORD, options))

    def _read_directories(self, spark: SparkSession, work: list[WorkUnit], schema: StructType) -> DataFrame:
        """All files of the group in one read; each record's dataset from its file's directory,
        matched on the decoded path (Spark reports ``file:/a%20b/x``, Hadoop lists ``file:/a b/x``)."""
        frame = self._reader(spark).schema(schema).load([f.path for u in work for f in u.payload])
        urns = {bare(f.path).rsplit("/", 1)[0]: u.dataset for u in work for f in u.payload}
        lookup = F.create_map(*[F.lit(v) for kv in urns.items() for v in kv])
        unschemed = F.regexp_replace(F.col("_metadata.file_path"), SCHEME, "")
        decoded = F.url_decode(F.replace(unschemed, F.lit("+"), F.lit("%2B")))
        parent = F.regexp_extract(decoded, r"^(.*)/[^/]*$", 1)
        unmapped = F.raise_error(F.concat(F.lit("a file outside the planned datasets: "), decoded))
        dataset = F.coalesce(F.element_at(lookup, parent), unmapped.cast("string"))
        out: DataFrame = frame.withColumn(DATASET, dataset)
        return out

    def _with_corrupt(self, ddl: str) -> str:
        """JSON and CSV keep the raw text of a record that does not fit in :data:`CORRUPT_RECORD`."""
        if self.conf.format in _KEEPS_CORRUPT:
            return f"{ddl}, `{CORRUPT_RECORD}` STRING"
        return ddl

    def _reader(self, spark: SparkSession) -> DataFrameReader:
        conf = self.conf
        reader = spark.read.format(conf.format).options(**{k: str(v) for k, v in conf.options.items()})
        if conf.format in _KEEPS_CORRUPT:
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        if self._headers is not None:  # every file's header checked against the schema as it is read
            reader = reader.option("enforceSchema", "false")
        return reader


def _ddl_schema(ddl: str) -> StructType:
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema
