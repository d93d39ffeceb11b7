"""A copy dataset's manifest: one JSON line per source file it published (path relative to the
dataset, guid, size, modification time, the outputs at the target with their sizes, and how they
were made), gzipped.

A manifest is written before the commit sequence that publishes it, under a name of its own per
batch, and becomes the dataset's state only through that sequence's watermark step, so a crash
never leaves a manifest claiming files that were not published.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass

from engine.copy.fs import Location


@dataclass(frozen=True)
class Entry:
    relative: str
    guid: str
    size: int
    mtime_ns: int
    outputs: list[tuple[str, int]]
    """``(path relative to the dataset's target root, size)`` of each file it produced."""
    made: str = ""
    """How it was made (:func:`engine.copy.copier.recipe`); empty for a file adopted as found."""

    def to_json(self) -> str:
        body = {"src": self.relative, "guid": self.guid, "size": self.size, "mtime_ns": self.mtime_ns}
        return json.dumps({**body, "out": self.outputs, "made": self.made}, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Entry:
        d = json.loads(line)
        outputs = [(str(o), int(n)) for o, n in d["out"]]
        return cls(d["src"], d["guid"], int(d["size"]), int(d["mtime_ns"]), outputs, str(d.get("made", "")))


def read(loc: Location, path: str) -> dict[str, Entry]:
    """The entries of the manifest at ``path`` by source relative path."""
    with loc.fs.open_input_stream(path, compression=None) as raw:
        text = gzip.decompress(raw.read()).decode()
    return {e.relative: e for e in (Entry.from_json(line) for line in text.splitlines() if line)}


def write(loc: Location, path: str, entries: list[Entry]) -> None:
    body = "".join(e.to_json() + "\n" for e in sorted(entries, key=lambda e: e.relative))
    data = gzip.compress(body.encode(), mtime=0)
    loc.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with loc.fs.open_output_stream(path, compression=None) as out:
        out.write(io.BytesIO(data).getvalue())
