"""Files a run read that have changed since: appended to (only the new bytes are read), or
rewritten (read again whole, saying so).

The file log keeps each file read with its modification time and size; a file counts as read
while both are those logged. A file logged with fewer bytes that has since grown was either
appended to (a log file, a CSV a producer adds lines to) or rewritten. Reading it whole again
published its first records twice. So a grown file of a line-oriented format (JSON lines, CSV,
text; not compressed) whose logged size ends a line is *appended*: the run reads the bytes after
that size only, copied on the driver into the DAG's scratch folder under the warehouse (a CSV
with a header gets its header line first) and read from there by Spark, each record still
carrying the file's own path (record ids, the error table's ``origin``). The copy is deterministic
(the same bytes for a plan re-executed after a crash) and goes once the batch is published.

Any other change (a Parquet or Avro file replaced, a compressed file, one that shrank, or whose
logged size does not end a line) is a *rewrite*: the file is new, read whole, and the dataset's
note says that the sinks that append now hold its earlier records twice. So is every changed file
under ``changed_files = whole`` (a producer that rewrites files in place: a rewrite that grew by
whole lines at the logged size looks like an append, and its changed earlier lines would be missed).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.sources.csv_headers import has_header, header_line
from engine.sources.file_listing import FileEntry

if TYPE_CHECKING:
    from engine.sources.conf import FilesSourceConf
    from engine.storage.hadoop import HadoopFs

COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".xz", ".br")
"""Names Hadoop's codecs read: their bytes cannot be cut where a line ends."""
READ_AGAIN = "read again whole, as a new file"
"""What a changed file's note says (the runtime adds which sinks then hold its records twice)."""


def line_oriented(conf: FilesSourceConf) -> bool:
    """Whether the source's files are lines, each a record (so new bytes after a line are new records)."""
    options = {k.lower(): str(v).lower() for k, v in conf.options.items()}
    if conf.format in ("json", "csv"):
        return options.get("multiline", "false") != "true"
    return conf.format == "text" and options.get("wholetext", "false") != "true"


def changed(fs: HadoopFs, conf: FilesSourceConf, entry: FileEntry, logged_size: int) -> tuple[FileEntry, str]:
    """``entry`` (a file logged read with ``logged_size`` bytes, changed since) as the run reads
    it: with the bytes read before to skip if it was appended to, else whole; and what to say."""
    if conf.changed_files == "whole":
        why = "changed_files = whole"
    elif 0 < logged_size < entry.size and _appendable(conf, entry.path) and _ends_a_line(fs, entry.path, logged_size):
        grown = entry.size - logged_size
        said = f"{entry.path} grew by {grown} bytes since a run read it: only they are read"
        return replace(entry, offset=logged_size), said
    else:
        why = "not lines added at its end"
    sizes = f"{logged_size} bytes then, {entry.size} now"
    return entry, f"{entry.path} changed since a run read it ({sizes}, {why}): {READ_AGAIN}"


def _appendable(conf: FilesSourceConf, path: str) -> bool:
    return line_oriented(conf) and not path.lower().endswith(COMPRESSED)


def _ends_a_line(fs: HadoopFs, path: str, size: int) -> bool:
    return fs.read_at(path, size - 1, 1) == b"\n"


def tail_copy(fs: HadoopFs, conf: FilesSourceConf, entry: FileEntry, scratch: str) -> str:
    """The bytes of ``entry`` from its ``offset`` to its planned size, as a file in ``scratch``
    (written unless a copy of the same bytes is there), under the file's own name (reader options
    such as ``pathGlobFilter`` take it as they take the file); a CSV with a header cut after its
    first line gets that line first."""
    digest = hashlib.sha1(f"{entry.path}|{entry.offset}|{entry.size}".encode()).hexdigest()[:20]
    target = f"{scratch.rstrip('/')}/{digest}/{entry.path.rsplit('/', 1)[-1]}"
    cut = entry.offset > 0 and conf.format == "csv" and has_header(conf.options)
    prefix = header_line(fs, entry.path) if cut else b""
    length = entry.size - entry.offset
    if fs.size(target) != len(prefix) + length:
        fs.copy_range(entry.path, target, entry.offset, length, prefix=prefix)
    return target
