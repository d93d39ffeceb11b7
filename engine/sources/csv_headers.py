"""CSV files read by their header's names, not by position.

Spark reads a CSV file with a given schema by position: a file whose header says ``id,city,name``
read with ``id, name, city`` puts cities in ``name``, without a word. So a source whose CSV has a
header reads with ``enforceSchema = false``: Spark then checks every file's header against the
schema, on the executors, as part of the read (a conforming file costs nothing more), and fails
the read naming the file when one differs. That failure is caught (:meth:`Headers.learn`): the
heads of the group's files are read on the driver, each header that is not the schema's is noted,
and the group is read again, each noted file by its own header (:func:`header_schema`, :func:`by_name`): its
columns typed as the schema types them, selected by name (the names compared without case, as
Spark compares them, and without the spaces around them). One the header has and the schema does
not is not read (the drift check says so). A header that lacks one of the schema's columns is
not read with nulls for it (a renamed column would be nulled without a word): the file's records
are rejected into the error table, the reason naming the file and the columns
(:func:`missing_columns`).
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from engine.errors import JobFailedError
from engine.sources.corrupt_files import error_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from engine.sources.workunits import WorkUnit
    from engine.storage.hadoop import HadoopFs

MISMATCHES = ("CSV header does not conform to the schema", "Number of column in CSV header is not equal to")
"""What Spark's header check (``enforceSchema = false``) says of a file whose header differs: in its
names (in order), or in its length."""
HEAD_BYTES = 64 * 1024


def has_header(options: Mapping[str, object]) -> bool:
    """Whether the reader options say the files have a header line (Spark takes option keys in any case)."""
    return any(k.lower() == "header" and str(v).lower() == "true" for k, v in options.items())


def reads_by_name(options: Mapping[str, object]) -> bool:
    """Whether CSV with these options is read by header name: it has a header, and the user did not
    ask for Spark's positional reading (``enforceSchema``, which Spark takes in any case) in so many
    words."""
    return has_header(options) and not any(k.lower() == "enforceschema" for k in options)


def header_line(fs: HadoopFs, path: str) -> bytes:
    """A CSV file's first line, its line end included (the whole file, if it has one line),
    decompressed when its name says a codec (a ``.csv.gz`` file's header is its text's first line)."""
    wanted = HEAD_BYTES
    while True:
        head = fs.head(path, wanted)
        end = head.find(b"\n")
        if end >= 0:
            return head[: end + 1]
        if len(head) < wanted:  # the whole file, one line
            return head
        wanted *= 4  # a header longer than a head: read on


def header_of(head: bytes, options: Mapping[str, object]) -> list[str]:
    """The names of the first line of a CSV file's head (the reader's ``sep``, ``quote`` and
    ``encoding``, whose keys Spark takes in any case), without a leading byte-order mark (which
    Excel writes; Spark's reader drops it too)."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    sep = opts.get("sep", opts.get("delimiter", ",")) or ","
    quote = opts.get("quote", '"')[:1] or '"'
    text = head.decode(opts.get("encoding", opts.get("charset", "utf-8")), errors="replace")
    text = text.removeprefix("\ufeff")
    if len(sep) > 1:  # Spark's multi-character separator: Python's csv takes one character
        first = next((line for line in text.splitlines() if line), "")  # blank lines skipped, as Spark does
        return [n[1:-1] if len(n) > 1 and n[0] == n[-1] == quote else n for n in first.split(sep)] if first else []
    for row in csv.reader(io.StringIO(text), delimiter=sep, quotechar=quote):
        if row:
            return row  # as Spark's header check sees the names: spaces around them kept
    return []


def name_key(name: str) -> str:
    """How a header's name is matched with a schema's column: without case or surrounding spaces."""
    return name.strip().lower()


def missing_columns(header: list[str], columns: list[str]) -> list[str]:
    """The schema's ``columns`` the ``header`` lacks (by :func:`name_key`)."""
    have = {name_key(h) for h in header}
    return [c for c in columns if name_key(c) not in have]


class Headers:
    """The headers of a run's CSV files that are not the schema's, by path (the groups of a run are
    read on threads)."""

    def __init__(self, options: Mapping[str, object]) -> None:
        self.options = dict(options)
        self._lock = threading.Lock()
        self._of: dict[str, list[str]] = {}

    def learn(self, error: BaseException, units: list[WorkUnit], fs: HadoopFs, columns: list[str]) -> bool:
        """If ``error`` is Spark's header check refusing a file, note the header of every file of
        ``units`` that is not ``columns`` (in order, as Spark compares them); whether any header is
        new, so that reading the units again reads them by name."""
        text = error_text(error)
        if not any(m in text for m in MISMATCHES):
            return False
        learned = False
        for unit in units:
            for entry in unit.payload if not unit.empty else []:
                with self._lock:
                    if entry.path in self._of:
                        continue
                header = header_of(header_line(fs, entry.path), self.options)
                if [h.lower() for h in header] != [c.lower() for c in columns]:  # as Spark's check compares
                    with self._lock:
                        self._of[entry.path] = header
                    learned = True
        return learned

    def of(self, path: str) -> list[str] | None:
        """The header of ``path`` if it is not the schema's (learned), else ``None``."""
        with self._lock:
            return self._of.get(path)


def header_schema(path: str, header: list[str], schema: StructType, *, corrupt: str) -> StructType:
    """The schema to read a file whose header is ``header`` by position: the header's columns in
    its order, typed as ``schema`` types them (text for one it lacks), and the ``corrupt``-record
    column if ``schema`` has it. (A column of ``schema`` the header lacks is left out: a line short
    of a value would read as malformed; :func:`by_name` makes it null.)"""
    by_name = {name_key(f.name): f for f in schema.fields}
    seen = [name_key(h) for h in header]
    twice = sorted({h.strip() for h in header if seen.count(name_key(h)) > 1})
    if twice or "" in seen or corrupt.lower() in seen:
        what = (
            f"names {', '.join(f'`{t}`' for t in twice)} twice"
            if twice
            else f"has a column `{corrupt}`, which the engine keeps for itself"
            if corrupt.lower() in seen
            else "has a column without a name"
        )
        raise JobFailedError(
            f"the header of {path} {what}: its columns cannot be read by name; fix the file, or set the "
            "source's options.enforceSchema = true to read it by position"
        )
    fields = [StructField(h, by_name[name_key(h)].dataType if name_key(h) in by_name else StringType()) for h in header]
    return StructType([*fields, *[f for f in schema.fields if f.name == corrupt]])


def by_name(frame: DataFrame, schema: StructType, *, keep: tuple[str, ...] = ()) -> DataFrame:
    """``frame`` (read with a :func:`header_schema`) as ``schema``'s columns, in its order, by name
    (without case, as Spark's header check compares them; null where the file has none), then the
    columns ``keep`` names."""
    named = {name_key(c): c for c in frame.columns}
    chosen = [
        F.col(f"`{named[name_key(f.name)]}`").alias(f.name)
        if name_key(f.name) in named
        else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]
    return frame.select(*chosen, *[F.col(f"`{c}`") for c in keep if c in frame.columns])
