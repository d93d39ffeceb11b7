"""Finding files: what the files source lists and how it names what it found.

:func:`list_files` lists what a files source reads: on the local file system by walking it from
Python (no Spark job: a job costs seconds on a cold JVM, on every run, even with nothing new), else
through Spark's own file index (:func:`spark_listing`: one round trip however many files, big
listings in parallel on executors). Both skip what Spark's readers skip (:func:`hidden`: ``_`` or
``.`` prefixes such as ``_SUCCESS``) and report the same paths, sizes and times. Existence and globs
go through the Hadoop FileSystem API (:class:`~engine.storage.hadoop.HadoopFs`: one py4j call per
path, so a glob means what it means to Spark). :class:`FileEntry` is what a work unit carries (a stored plan names it).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pyspark.sql import functions as F

from engine.platform.jvm import session_settings
from engine.storage.filesystem import hidden
from engine.storage.hadoop import HadoopFs
from engine.storage.options import local_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

GLOB = re.compile(r"[*?\[{]")
SCHEME = r"^[a-zA-Z][a-zA-Z0-9+.-]*:(//[^/]*)?"


@dataclass(frozen=True)
class FileEntry:
    path: str
    """The file's qualified Hadoop path, as Spark's readers take it (``file:/in/a b/x.json``)."""
    size: int
    mtime_ms: int
    dataset: str
    offset: int = 0
    """How many of its first bytes a run read before (a file appended to since it was read):
    only the bytes after them are read (:mod:`engine.sources.appended`)."""

    @property
    def position(self) -> tuple[int, str]:
        return (self.mtime_ms, self.path)


def directory_prefix(path: str) -> str:
    """The directories of a glob before its first wildcard (``/in/2026-*/x.json`` -> ``/in``)."""
    head = GLOB.split(path, maxsplit=1)[0]
    return head.rsplit("/", 1)[0] or "/"


def list_files(spark: SparkSession, patterns: list[str], *, key: str = "") -> list[tuple[str, int, int]]:
    """``(hadoop path, bytes, mtime ms)`` of every visible file under ``patterns``, recursively:
    local patterns walked from Python, the others listed by Spark. A file a glob matches by name is
    left out too when its name is hidden: Spark's readers drop such a file's records even when a
    path names it, and a run that listed it would log it as read (issue 74: silent loss). The
    source (``key``) says which it left out (:func:`_say_skipped`)."""
    local = [p for p in patterns if local_path(p) is not None]
    remote = [p for p in patterns if local_path(p) is None]
    found = local_listing(HadoopFs(spark), local) + spark_listing(spark, remote)
    visible = [entry for entry in found if not hidden(entry[0].rsplit("/", 1)[-1])]
    _say_skipped(sorted(entry[0] for entry in found if hidden(entry[0].rsplit("/", 1)[-1])), key)
    return visible


MARKERS = re.compile(r"^(_SUCCESS|_committed_.*|_started_.*|\..*\.crc)$")
"""Hidden names that writers leave beside their data (Hadoop's and Spark's commit markers,
checksums): skipped without a word."""


def first_few(paths: list[str], shown: int = 5) -> str:
    """The first ``shown`` paths, and how many more (a warning's list of files)."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def _say_skipped(paths: list[str], key: str) -> None:
    named = [p for p in paths if not MARKERS.match(p.rsplit("/", 1)[-1])]
    if not named:
        return
    shown = first_few(named)
    where = f"{key}: " if key else ""
    log.warning(
        "%s%d file(s) matched but not read: Spark's readers skip names starting with `_` or `.` "
        "(rename them to have them read): %s",
        where,
        len(named),
        shown,
    )


def local_listing(fs: HadoopFs, patterns: list[str]) -> list[tuple[str, int, int]]:
    """What :func:`spark_listing` gives for local ``patterns``, without a Spark job: each pattern
    globbed by Hadoop (one py4j call), each match walked (symbolic links followed, as Hadoop's local
    file system does). Times are milliseconds, truncated as Java's are."""
    out = []
    for pattern in patterns:
        for uri, is_dir in fs.glob(pattern, visible_only=False):
            root = bare(uri)
            paths = [root] if not is_dir else _walk(root)
            out += [entry for path in paths if (entry := _local_entry(path)) is not None]
    return out


def _walk(root: str) -> Iterator[str]:
    for folder, dirs, names in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if not hidden(d)]
        yield from (os.path.join(folder, n) for n in names if not hidden(n))


def _local_entry(path: str) -> tuple[str, int, int] | None:
    """``None`` for a link to nothing or a file gone since the walk saw it: Spark skips those too."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return f"file:{path}", st.st_size, st.st_mtime_ns // 1_000_000


def spark_listing(spark: SparkSession, patterns: list[str]) -> list[tuple[str, int, int]]:
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
    "spark.sql.files.maxPartitionNum",  # a scan packs small files by their open cost: many tasks
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
            for key, value in session_settings(spark).items():
                if session.conf.isModifiable(key):
                    session.conf.set(key, value)
            tasks = str(max(2, spark.sparkContext.defaultParallelism))
            for key in _LISTING_TASKS:
                session.conf.set(key, tasks)
            spark._engine_listing = session  # type: ignore[attr-defined]
        return session


def bare(path: str) -> str:
    """A Hadoop path without its scheme and authority (``file:/a b/x`` -> ``/a b/x``)."""
    return re.sub(SCHEME, "", path)
