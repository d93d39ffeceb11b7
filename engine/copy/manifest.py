"""A copy dataset's manifest: one row per source file it published (path relative to the dataset,
guid, size, modification time, the outputs at the target with their sizes, and how they were
made), a Parquet file any reader opens (pyarrow, Spark, DuckDB).

A manifest is written before the commit sequence that publishes it, under a name of its own per
batch, and becomes the dataset's state only through that sequence's watermark step, so a crash
never leaves a manifest claiming files that were not published.

It is read whole on every run's planning, so it is columnar: Parquet reads many times faster
than the JSON lines of earlier versions (``*.jsonl.gz``, still read; `bench/copy_files.py`).
"""

from __future__ import annotations

import gzip
import json
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from engine.copy.fs import Location

LEGACY_SUFFIX = ".jsonl.gz"
"""Manifests written before the Parquet layout (read, never written)."""

VERSION = 1
"""The layout written, kept in the Parquet footer (``engine.manifest_version``); a manifest of a
newer layout is refused as unreadable rather than misread."""
_VERSION_KEY = b"engine.manifest_version"

SCHEMA = pa.schema(
    [
        pa.field("src", pa.string(), nullable=False),
        pa.field("guid", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("mtime_ns", pa.int64(), nullable=False),
        pa.field("out_paths", pa.list_(pa.string()), nullable=False),
        pa.field("out_sizes", pa.list_(pa.int64()), nullable=False),
        pa.field("made", pa.string(), nullable=False),
    ]
)


class Entry(NamedTuple):
    relative: str
    guid: str
    size: int
    mtime_ns: int
    outputs: list[tuple[str, int]]
    """``(path relative to the dataset's target root, size)`` of each file it produced."""
    made: str = ""
    """How it was made (:attr:`engine.copy.copier.CopyOptions.recipe`); empty for a file adopted as found."""

    @classmethod
    def from_json(cls, line: str) -> Entry:
        d = json.loads(line)
        outputs = [(str(o), int(n)) for o, n in d["out"]]
        return cls(d["src"], d["guid"], int(d["size"]), int(d["mtime_ns"]), outputs, str(d.get("made", "")))


def read(loc: Location, path: str) -> dict[str, Entry]:
    """The entries of the manifest at ``path`` by source relative path."""
    if path.endswith(LEGACY_SUFFIX):
        return _read_legacy(loc, path)
    with loc.fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        schema = parquet.schema_arrow
        found = int((schema.metadata or {}).get(_VERSION_KEY, b"0"))
        if found > VERSION:
            raise ValueError(f"manifest layout {found} is newer than this engine's ({VERSION})")
        missing = [name for name in SCHEMA.names if name not in schema.names]
        if missing:
            raise ValueError(f"not a manifest: no column {', '.join(f'`{m}`' for m in missing)}")
        table = parquet.read(columns=SCHEMA.names)
    for name in SCHEMA.names:
        if table.column(name).null_count:
            raise ValueError(f"manifest column `{name}` has nulls")
    columns = [table.column(name).to_pylist() for name in SCHEMA.names]
    src, guid, size, mtime, out_paths, out_sizes, made = columns
    outputs = [list(zip(p, n, strict=True)) for p, n in zip(out_paths, out_sizes, strict=True)]
    return dict(zip(src, map(Entry._make, zip(src, guid, size, mtime, outputs, made, strict=True)), strict=True))


def _read_legacy(loc: Location, path: str) -> dict[str, Entry]:
    with loc.fs.open_input_stream(path, compression=None) as raw:
        text = gzip.decompress(raw.read()).decode()
    return {e.relative: e for e in (Entry.from_json(line) for line in text.splitlines() if line)}


def write(loc: Location, path: str, entries: list[Entry]) -> None:
    """Write ``entries`` (sorted by source path) as the Parquet manifest at ``path``."""
    rows = sorted(entries, key=lambda e: e.relative)
    table = pa.table(
        [
            [e.relative for e in rows],
            [e.guid for e in rows],
            [e.size for e in rows],
            [e.mtime_ns for e in rows],
            [[o for o, _ in e.outputs] for e in rows],
            [[n for _, n in e.outputs] for e in rows],
            [e.made for e in rows],
        ],
        schema=SCHEMA.with_metadata({_VERSION_KEY: str(VERSION).encode()}),
    )
    loc.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with loc.fs.open_output_stream(path, compression=None) as out:
        pq.write_table(table, out, compression="zstd")
