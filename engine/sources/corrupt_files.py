"""Files that cannot be read (a truncated gzip, a broken Parquet footer), and ``on_corrupt = skip``.

Spark's ``ignoreCorruptFiles`` skips such a file silently and keeps the records read before the
damage. Instead the read runs as usual (the valid path pays nothing); when it fails, Spark's error
(``FAILED_READ_FILE``) names the file: :meth:`SkippedFiles.drop` takes it out of its work unit and
the group is read again without it. Each skipped file becomes one error record of step ``read``
(its path as the record, Spark's error as the reason), a note on its dataset's status row and an
entry in the file log, so it is not read again until it is replaced (new modification time or size).
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from engine.columns import DATASET, SKIPPED_FILE
from engine.sources.base import CORRUPT_REASON, CORRUPT_RECORD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from engine.sources.workunits import WorkUnit

_FILE_ERROR = "FAILED_READ_FILE"
"""Spark's error class for a file it could not read; its message names the file."""
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:(//[^/]*)?")
_CAUSE = re.compile(r"^Caused by: (?:[\w$.]+\.)?(\w+(?:Exception|Error)): (.*)$", re.MULTILINE)


def error_text(error: BaseException) -> str:
    """Everything an error says, its causes included (a py4j error carries the Java trace)."""
    parts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(parts) < 8:
        parts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def is_file_error(error: BaseException) -> bool:
    """Whether ``error`` is Spark failing to read a file (which its message names)."""
    return _FILE_ERROR in error_text(error)


def unreadable_files(error: BaseException, paths: list[str]) -> list[str]:
    """Which of ``paths`` a file-read failure names (none if ``error`` is not one)."""
    text = error_text(error)
    if _FILE_ERROR not in text:
        return []
    return [p for p in paths if _named(_bare(p), text)]


def _named(bare: str, text: str) -> bool:
    """Whether ``text`` names the file (as a path or a URI), not merely a longer name it starts."""
    return any(re.search(re.escape(form) + r"(?![\w/-]|\.\w)", text) for form in {bare, quote(bare)})


def _bare(path: str) -> str:
    return _SCHEME.sub("", path)


def why(error: BaseException) -> str:
    """Spark's one-line message, and the root cause under it (``EOFException: Unexpected end of input stream``)."""
    text = error_text(error)
    first = next((ln.strip() for ln in text.splitlines() if _FILE_ERROR in ln), text.splitlines()[0] if text else "")
    first = re.sub(r"^[\w$.]+Exception: ", "", first)
    causes = _CAUSE.findall(text)
    if causes:
        name, message = causes[-1]
        first = f"{first.rstrip()} ({name}: {message.strip()})"
    return first


class SkippedFiles:
    """The files a source skipped this run, by dataset (groups are read on threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_dataset: dict[str, list[tuple[Any, str]]] = {}

    def drop(self, error: BaseException, units: list[WorkUnit]) -> bool:
        """Take the files ``error`` names out of ``units`` (recording why); whether any were."""
        reason = why(error)
        dropped = False
        for unit in units:
            if unit.empty:
                continue
            bad = set(unreadable_files(error, [f.path for f in unit.payload]))
            if not bad:
                continue
            with self._lock:
                self._by_dataset.setdefault(unit.dataset, []).extend((f, reason) for f in unit.payload if f.path in bad)
            unit.payload = [f for f in unit.payload if f.path not in bad]
            skipped = ", ".join(sorted(bad))
            unit.note = "; ".join(
                n for n in (unit.note, f"skipped unreadable file(s) (on_corrupt = skip): {skipped}") if n
            )
            dropped = True
        return dropped

    def of(self, dataset: str) -> list[tuple[Any, str]]:
        """``(file entry, why)`` of each file of ``dataset`` skipped."""
        with self._lock:
            return list(self._by_dataset.get(dataset, []))

    def with_error_rows(self, spark: SparkSession, frame: DataFrame, units: list[WorkUnit]) -> DataFrame:
        """``frame`` and one error record per skipped file of ``units``: its path as the raw record."""
        rows = [
            (json.dumps({"file": f.path}), f"{SKIPPED_FILE}, it cannot be read: {reason}", u.dataset)
            for u in units
            for f, reason in self.of(u.dataset)
        ]
        if not rows:
            return frame
        ddl = f"`{CORRUPT_RECORD}` STRING, `{CORRUPT_REASON}` STRING, `{DATASET}` STRING"
        return frame.unionByName(spark.createDataFrame(rows, ddl), allowMissingColumns=True)
