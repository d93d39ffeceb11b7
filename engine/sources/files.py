"""Files on any Hadoop file system, read by Spark's built-in formats, incrementally.

``new_files``: a dataset's watermark is the last file read, by (modification time, path), and the
file log (``_engine/files_read``) holds every file it read. A run reads the files after the
watermark, in that order, plus *late* files: files before it that the log lacks, whatever their
modification time (delivered late by ``rsync -a``, ``cp -p`` or ``distcp -p``). Ties on
modification time are ordered by path, so throttling may stop between two files of the same
second and the next run continues exactly there.

``partitions``: a dataset is a root directory; its date partitions (``pattern``) are read whole,
in time order, once their end is ``delay`` in the past; the watermark is the last partition's
start time.

Listing uses the Hadoop FileSystem API (no Spark job); hidden files and directories (``_`` or
``.`` prefixes, e.g. ``_SUCCESS``) are ignored, as Spark's readers do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import reduce
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from engine.columns import DATASET
from engine.errors import ConfigError, JobFailedError
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD, LoggedFile, PlanContext, Source
from engine.sources.conf import FilesSourceConf
from engine.sources.corrupt_files import SkippedFiles, is_file_error, why
from engine.sources.record_errors import corrupt_reason
from engine.sources.workunits import Candidate, Size, WorkUnit, take
from engine.state.errors import FileLogLostError
from engine.state.store import FileKey
from engine.state.watermarks import LAST_PATH, FileWatermark, TimestampWatermark, parse_timestamp

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

log = logging.getLogger(__name__)
_KEEPS_CORRUPT = ("json", "csv")
_GLOB = re.compile(r"[*?\[{]")


@dataclass(frozen=True)
class FileEntry:
    path: str
    """The file's qualified Hadoop path, as Spark's readers take it (``file:/in/a b/x.json``)."""
    size: int
    mtime_ms: int
    dataset: str

    @property
    def position(self) -> tuple[int, str]:
        return (self.mtime_ms, self.path)


@dataclass(frozen=True)
class Partition:
    dataset: str
    start: datetime
    files: tuple[FileEntry, ...]


class FilesSource(Source):
    """See :class:`~engine.sources.conf.FilesSourceConf` for its config."""

    Conf = FilesSourceConf
    conf: FilesSourceConf

    def __init__(self, conf: FilesSourceConf, *, name: str, key: str, schema_ddl: str | None) -> None:
        super().__init__(conf, name=name, key=key, schema_ddl=schema_ddl)
        self._skipped = SkippedFiles()

    def check(self, spark: SparkSession, *, not_yet: frozenset[str] = frozenset()) -> None:
        fs = _HadoopFs(spark)
        for path in (p for p in self.conf.paths() if p not in not_yet):
            # A glob that matches nothing yet is fine (nothing new); its fixed prefix must exist.
            probe = path if not _GLOB.search(path) else _fixed_prefix(path)
            if not fs.exists(probe):
                raise ConfigError(f"input path does not exist: {probe}", key=f"{self.key}.path")
        if self.conf.incremental == "partitions" and self.conf.partitions is None:
            raise ConfigError("`incremental = partitions` needs a `partitions { pattern = ... }` block", key=self.key)
        if self.conf.backfill and self.conf.incremental == "none":
            raise ConfigError("a backfill range (`from`/`to`) needs an incremental source", key=f"{self.key}.from")

    # -- planning ------------------------------------------------------------------------------

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        if self.conf.incremental == "partitions":
            return self._plan_partitions(spark, ctx)
        files = self._list(spark)
        if self.conf.incremental == "none":
            return self._plan_everything(files, ctx)
        return self._plan_new_files(files, ctx)

    def _plan_everything(self, files: list[FileEntry], ctx: PlanContext) -> list[WorkUnit]:
        by_dataset = _group(files)
        return [
            WorkUnit(dataset=d, low=None, high=None, size=_size(fs), payload=fs) for d, fs in sorted(by_dataset.items())
        ]

    def _plan_new_files(self, files: list[FileEntry], ctx: PlanContext) -> list[WorkUnit]:
        cutoff = int((ctx.now.replace(tzinfo=timezone.utc).timestamp() - float(self.conf.min_age)) * 1000)
        start, end = self._range_ms()
        by_dataset = _group(files)
        known = set(by_dataset) | set(ctx.state)
        lows = {d: self._file_low(d, ctx) for d in known}
        logged = ctx.files_read() if any(low is not None for low in lows.values()) else {}
        for dataset, low in lows.items():
            if low is not None and low.logged and dataset not in logged:
                raise FileLogLostError(
                    key=self.key, dataset=dataset, watermark=low.display(), value=f"{low.mtime_ms}|{low.path}"
                )
        candidates = []
        for dataset in sorted(known):
            read_before = _ReadBefore(lows[dataset], logged.get(dataset, set()), self._lookback_ms)
            eligible = [
                f
                for f in by_dataset.get(dataset, [])
                if f.mtime_ms <= cutoff and start <= f.mtime_ms < end and not read_before(f)
            ]
            eligible.sort(key=lambda f: f.position)
            candidates.append(Candidate(dataset, eligible, ctx.rank(dataset)))
        chosen = take(candidates, _file_size, per_dataset=ctx.per_dataset, per_run=ctx.per_run, guarantee=ctx.guarantee)
        units = []
        for cand in candidates:
            low = lows[cand.dataset]
            picked, throttled = chosen[cand.dataset]
            if not picked:
                units.append(WorkUnit.carry(cand.dataset, low, "throttled" if throttled else "no new files"))
                continue
            late = sum(1 for f in picked if low is not None and f.position <= low.position)
            note = f"{late} late file(s)" if late else ""
            if throttled:
                note = ", ".join(n for n in (note, f"throttled: {len(picked)} of {len(cand.items)} files") if n)
            high = _advance(low, picked, self._lookback_ms)
            units.append(WorkUnit(cand.dataset, low, high, size=_size(picked), payload=picked, note=note))
        return units

    def _file_low(self, dataset: str, ctx: PlanContext) -> FileWatermark | None:
        low = ctx.low(dataset)
        if low is not None and not isinstance(low, FileWatermark):
            raise ConfigError(
                f"dataset {dataset} has a {low.kind} watermark, not a file one; "
                "reset it with mode=checkpoint checkpoint.action=reset",
                key=f"{self.key}.incremental",
            )
        return low

    @property
    def _lookback_ms(self) -> int:
        return int(float(self.conf.lookback) * 1000)

    def files_read(self, unit: WorkUnit) -> list[LoggedFile]:
        """The files read, and those skipped as unreadable (logged with why, so not read again)."""
        if self.conf.incremental != "new_files" or unit.empty:
            return []
        skipped = [(f.path, f.mtime_ms, f.size, f"skipped: {why}") for f, why in self._skipped.of(unit.dataset)]
        return [(f.path, f.mtime_ms, f.size, "") for f in unit.payload] + skipped

    def _plan_partitions(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        conf = self.conf.partitions
        assert conf is not None
        layout = _PartitionLayout(conf.pattern)
        fs = _HadoopFs(spark)
        ready_before = ctx.now - timedelta(seconds=float(conf.delay))
        first = parse_timestamp(conf.start) if conf.start else datetime.min
        lo = parse_timestamp(self.conf.from_) if self.conf.from_ else datetime.min
        hi = parse_timestamp(self.conf.to) if self.conf.to else datetime.max
        roots = sorted({r for p in self.conf.paths() for r, is_dir in fs.glob(p) if is_dir})
        under: dict[str, list[tuple[str, int, int]]] = {r: [] for r in roots}
        bare_roots = {_bare(r).rstrip("/") + "/": r for r in roots}
        for path, size, mtime in _spark_listing(spark, roots):
            bare = _bare(path)
            owner = next((r for prefix, r in bare_roots.items() if bare.startswith(prefix)), None)
            if owner is not None:
                under[owner].append((bare[len(_bare(owner).rstrip("/")) + 1 :], size, mtime))
        candidates = []
        for root in roots:
            dataset = f"files:{root}"
            low = ctx.low(dataset)
            if low is not None and not isinstance(low, TimestampWatermark):
                raise ConfigError(f"dataset {dataset} has a {low.kind} watermark, not a timestamp one", key=self.key)
            parts: dict[datetime, list[FileEntry]] = {}
            for relative, size, mtime in under[root]:
                start = layout.start_of(relative)
                if start is not None:
                    entry = FileEntry(path=f"{root.rstrip('/')}/{relative}", size=size, mtime_ms=mtime, dataset=dataset)
                    parts.setdefault(start, []).append(entry)
            eligible = [
                Partition(dataset, s, tuple(fs_))
                for s, fs_ in sorted(parts.items())
                if layout.end_of(s) <= ready_before
                and (low is None or s > low.value)
                and (low is not None or s >= first)
                and lo <= s < hi
            ]
            candidates.append(Candidate(dataset, eligible, ctx.rank(dataset)))
        for dataset in set(ctx.state) - {c.dataset for c in candidates}:
            candidates.append(Candidate(dataset, [], ctx.rank(dataset)))
        chosen = take(
            candidates,
            lambda p: _size(list(p.files)),
            per_dataset=ctx.per_dataset,
            per_run=ctx.per_run,
            guarantee=ctx.guarantee,
        )
        units = []
        for cand in candidates:
            low = ctx.low(cand.dataset)
            picked, throttled = chosen[cand.dataset]
            if not picked:
                units.append(WorkUnit.carry(cand.dataset, low, "throttled" if throttled else "no new partitions"))
                continue
            files = [f for p in picked for f in p.files]
            note = f"partitions {picked[0].start:%Y-%m-%d %H:%M}..{picked[-1].start:%Y-%m-%d %H:%M}"
            units.append(
                WorkUnit(
                    cand.dataset, low, TimestampWatermark(picked[-1].start), size=_size(files), payload=files, note=note
                )
            )
        return units

    def _list(self, spark: SparkSession) -> list[FileEntry]:
        """Every visible file under the paths, listed by Spark's own file index (``binaryFile``
        without its content column reads no file; big listings run in parallel on executors):
        one round trip however many files, where per-file Hadoop calls through py4j cost ~1 ms each."""
        fs = _HadoopFs(spark)
        patterns = [p for p in self.conf.paths() if fs.matches(p)]  # a glob matching nothing yet is no data
        single = f"files:{self.conf.paths()[0]}" if self.conf.datasets == "single" else None
        found: dict[str, FileEntry] = {}
        for path, size, mtime in _spark_listing(spark, patterns):
            dataset = single or f"files:{path.rsplit('/', 1)[0]}"
            found[path] = FileEntry(path=path, size=size, mtime_ms=mtime, dataset=dataset)
        return list(found.values())

    def _range_ms(self) -> tuple[int, int]:
        def ms(text: str | None, default: int) -> int:
            if text is None:
                return default
            try:
                return int(parse_timestamp(text).replace(tzinfo=timezone.utc).timestamp() * 1000)
            except ValueError as exc:
                raise ConfigError(f"`{text}` is not a timestamp", key=f"{self.key}.from") from exc

        return ms(self.conf.from_, -(2**62)), ms(self.conf.to, 2**62)

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
        fingerprint = self._fingerprint()
        pinned = ctx.pinned_schema()
        if pinned is not None and pinned.fingerprint == fingerprint:
            return _ddl_schema(self._with_corrupt(pinned.ddl))
        inferred = self._infer(spark, units)
        if inferred is None:
            return None
        if pinned is not None:
            log.warning("%s: its format or reader options changed: the schema is inferred and pinned again", self.key)
        data = StructType([f for f in inferred.fields if f.name != CORRUPT_RECORD])
        ctx.pin_schema(fingerprint, data.toDDL())
        return _ddl_schema(self._with_corrupt(data.toDDL()))

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

    def _fingerprint(self) -> str:
        """What an inferred schema depends on besides the data: the format and the reader options."""
        text = json.dumps([self.conf.format, {k: str(v) for k, v in self.conf.options.items()}], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def read(self, spark: SparkSession, units: list[WorkUnit], schema: StructType) -> DataFrame:
        work = [u for u in units if not u.empty and u.payload]  # a unit may have lost all its files
        if not work:
            frame = spark.createDataFrame([], schema).withColumn(DATASET, F.lit(None).cast("string"))
        elif self.conf.datasets == "directory" and self.conf.incremental != "partitions":
            frame = self._read_directories(spark, work, schema)
        else:
            frames = [
                self._reader(spark)
                .schema(schema)
                .load([f.path for f in u.payload])
                .withColumn(DATASET, F.lit(u.dataset))
                for u in work
            ]
            frame = reduce(lambda a, b: a.unionByName(b), frames)
        return self._skipped.with_error_rows(spark, self._with_reasons(frame, schema), units)

    def skip_unreadable(self, error: BaseException, units: list[WorkUnit]) -> bool:
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
        urns = {_bare(f.path).rsplit("/", 1)[0]: u.dataset for u in work for f in u.payload}
        lookup = F.create_map(*[F.lit(v) for kv in urns.items() for v in kv])
        bare = F.regexp_replace(F.col("_metadata.file_path"), _SCHEME, "")
        decoded = F.url_decode(F.replace(bare, F.lit("+"), F.lit("%2B")))
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
        return reader


def _ddl_schema(ddl: str) -> StructType:
    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


class _ReadBefore:
    """Whether a dataset read a file before: the file log has it (same path, modification time
    and size: a file rewritten in place is new), or it lies at or before the watermark's floor.
    Files after the watermark are always new (after a rewind, the log has them and they are read
    again); a file before it that the log lacks is late, whatever its modification time."""

    def __init__(self, low: FileWatermark | None, logged: set[FileKey], lookback_ms: int) -> None:
        self.low = low
        self.logged = logged
        self.floor = _floor(low, lookback_ms) if low is not None else None
        self.recent = set(low.recent) if low is not None else set()

    def __call__(self, f: FileEntry) -> bool:
        if self.low is None or f.position > self.low.position:
            return False
        if self.floor is not None and f.position <= self.floor:
            return True
        return (f.path, f.mtime_ms, f.size) in self.logged or f.path in self.recent


def _floor(low: FileWatermark, lookback_ms: int) -> tuple[int, str] | None:
    """Where late files stop being looked for: a watermark stored before the file log knew only
    the files read within ``lookback`` of it, so anything older counts as read."""
    if low.legacy:
        return (low.mtime_ms - lookback_ms, LAST_PATH)
    return low.floor


def _advance(low: FileWatermark | None, picked: list[FileEntry], lookback_ms: int) -> FileWatermark:
    """The watermark after reading ``picked``: the furthest position, the floor carried (a legacy
    watermark's look-back window becomes one) and a legacy watermark's recent paths with it."""
    furthest = max(f.position for f in picked)
    if low is not None and low.position > furthest:
        furthest = low.position
    floor = _floor(low, lookback_ms) if low is not None else None
    recent = low.recent if low is not None else ()
    return FileWatermark(furthest[0], furthest[1], recent, floor=floor)


def _group(files: list[FileEntry]) -> dict[str, list[FileEntry]]:
    out: dict[str, list[FileEntry]] = {}
    for f in files:
        out.setdefault(f.dataset, []).append(f)
    return out


def _size(files: list[FileEntry]) -> Size:
    return Size(records=None, bytes=sum(f.size for f in files), files=len(files))


def _file_size(f: FileEntry) -> Size:
    return Size(records=None, bytes=f.size, files=1)


def _fixed_prefix(path: str) -> str:
    """The directories of a glob before its first wildcard (``/in/2026-*/x.json`` -> ``/in``)."""
    head = _GLOB.split(path, maxsplit=1)[0]
    return head.rsplit("/", 1)[0] or "/"


def _spark_listing(spark: SparkSession, patterns: list[str]) -> list[tuple[str, int, int]]:
    """``(hadoop path, bytes, mtime ms)`` of every visible file under ``patterns``, recursively."""
    if not patterns:
        return []
    listing = (
        _listing_session(spark)
        .read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(patterns)
        .select("path", "length", (F.unix_micros("modificationTime") / 1000).cast("long").alias("mtime"))
    )
    # Spark reports URIs (a%20b); Hadoop paths, which its readers take, are decoded.
    return [(unquote(r["path"]), int(r["length"]), int(r["mtime"])) for r in listing.collect()]


_LISTING_LOCK = threading.Lock()
_LISTING_TASKS = (
    "spark.sql.sources.parallelPartitionDiscovery.parallelism",  # default 10,000: a task per path
    "spark.sql.files.maxPartitionNum",  # a scan packs small files by a 4 MB open cost: 600+ tasks
)


def _listing_session(spark: SparkSession) -> SparkSession:
    """A session with ``spark``'s settings whose file index and scan are sized for a listing.

    A glob matching thousands of files gives the file index as many root paths: by default it
    lists them in a Spark job of one task per path, and the ``binaryFile`` scan that follows packs
    them into hundreds of tasks that each do next to nothing. Capping both at the cluster's
    parallelism keeps the listing parallel with a few tasks (``bench/file_log.py``). Only the
    task counts differ from ``spark``, so what is listed is the same; the session is made once
    per run session and shared by its DAG threads."""
    with _LISTING_LOCK:
        session: SparkSession | None = getattr(spark, "_engine_listing", None)
        if session is None:
            session = spark.newSession()
            for key, value in spark.conf.getAll.items():
                if session.conf.isModifiable(key):
                    session.conf.set(key, value)
            tasks = str(max(2, spark.sparkContext.defaultParallelism))
            for key in _LISTING_TASKS:
                session.conf.set(key, tasks)
            spark._engine_listing = session  # type: ignore[attr-defined]
        return session


_SCHEME = r"^[a-zA-Z][a-zA-Z0-9+.-]*:(//[^/]*)?"


def _bare(path: str) -> str:
    """A Hadoop path without its scheme and authority (``file:/a b/x`` -> ``/a b/x``)."""
    return re.sub(_SCHEME, "", path)


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


class _HadoopFs:
    """The Hadoop FileSystem API through py4j, for what costs one call per path: existence and globs
    (listing many files goes through :func:`_spark_listing`)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        jpath = self._path(path)
        return bool(jpath.getFileSystem(self._conf).exists(jpath))

    def matches(self, pattern: str) -> bool:
        """Whether anything matches (one call, whatever the number of matches)."""
        jpath = self._path(pattern)
        found = jpath.getFileSystem(self._conf).globStatus(jpath)
        return found is not None and len(found) > 0

    def glob(self, pattern: str) -> list[tuple[str, bool]]:
        """``(uri, is_directory)`` of each visible match."""
        jpath = self._path(pattern)
        matches = jpath.getFileSystem(self._conf).globStatus(jpath)
        if matches is None:
            return []
        out = []
        for status in matches:
            path = status.getPath()
            if not _hidden(path.getName()):
                out.append((path.toString(), bool(status.isDirectory())))
        return out


class _PartitionLayout:
    """``yyyy/MM/dd`` or ``dt=yyyy-MM-dd/HH`` as a regex over a file's path below its root."""

    _FIELDS = {"yyyy": r"(?P<y>\d{4})", "MM": r"(?P<m>\d{2})", "dd": r"(?P<d>\d{2})", "HH": r"(?P<h>\d{2})"}

    def __init__(self, pattern: str) -> None:
        regex = ""
        rest = pattern
        while rest:
            token = next((t for t in self._FIELDS if rest.startswith(t)), None)
            if token:
                regex += self._FIELDS[token]
                rest = rest[len(token) :]
            else:
                regex += re.escape(rest[0])
                rest = rest[1:]
        self.regex = re.compile(regex + "/")
        self.unit = "h" if "HH" in pattern else "d" if "dd" in pattern else "m" if "MM" in pattern else "y"

    def start_of(self, relative: str) -> datetime | None:
        found = self.regex.match(relative)
        if not found:
            return None
        g = found.groupdict()
        return datetime(int(g["y"]), int(g.get("m") or 1), int(g.get("d") or 1), int(g.get("h") or 0))

    def end_of(self, start: datetime) -> datetime:
        if self.unit == "h":
            return start + timedelta(hours=1)
        if self.unit == "d":
            return start + timedelta(days=1)
        if self.unit == "m":
            return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        return start.replace(year=start.year + 1)
