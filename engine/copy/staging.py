"""The copy DAG's staging directory: where a file's outputs are staged and the journals that let
the next run reuse what a failed run staged. No Spark here.

Each task keeps a *journal* of the files it finished: JSON lines in
``<staging>/<token>.<n>.jsonl``, written every :data:`JOURNAL_EVERY` files or
:data:`JOURNAL_SECONDS` and when the task ends, each part written whole (temporary name, then a
rename). Before copying, the driver reads the journals (:func:`staged_entries`): a file with an
entry made the same way whose staged outputs are intact is *reused*, not copied again. A block of
a split file leaves a marker instead (:func:`read_block_marker`). One journal write per many
files keeps small files cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from typing import Any

from engine.copy.listing import CopyableFile
from engine.copy.options import REUSED, Copied, CopyItem, CopyOptions, copied

__all__ = [
    "JOURNAL_EVERY",
    "JOURNAL_SECONDS",
    "Journal",
    "journal_entry",
    "marker_path",
    "read_block_marker",
    "reusable",
    "staged_entries",
    "staged_file",
    "staged_path",
    "write_whole",
]

JOURNAL_EVERY = 512
JOURNAL_SECONDS = 2.0


class Journal:
    """The journal of one task (or of the driver): entries of staged files, flushed in parts."""

    def __init__(self, options: CopyOptions) -> None:
        self.options = options
        self.token = uuid.uuid4().hex
        self.parts = 0
        self.pending: list[str] = []
        self.flushed = time.monotonic()

    def add(self, entry: dict[str, Any]) -> None:
        self.pending.append(json.dumps(entry, separators=(",", ":")))
        if len(self.pending) >= JOURNAL_EVERY or time.monotonic() - self.flushed >= JOURNAL_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        if not self.pending:
            return
        path = f"{self.options.staging}/{self.token}.{self.parts}.jsonl"
        body = "".join(line + "\n" for line in self.pending).encode()
        self.pending = []
        with contextlib.suppress(OSError):  # (disk full) lost entries only mean copying again next run
            write_whole(self.options, path, body)
            self.parts += 1


def write_whole(options: CopyOptions, path: str, body: bytes) -> None:
    tmp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
    if options.target.local:
        with open(tmp, "wb") as out:
            out.write(body)
        os.replace(tmp, path)
        return
    fs = options.target.fs
    with fs.open_output_stream(tmp, compression=None) as stream:
        stream.write(body)
    fs.move(tmp, path)


def journal_entry(
    options: CopyOptions, f: CopyableFile, staged: list[tuple[str, int]], outs: list[tuple[str, int]]
) -> dict[str, Any]:
    return {
        "key": f.stage_key,
        "guid": f.guid,
        "staged": [[o, n] for o, n in staged],
        "outputs": [[o, n] for o, n in outs],
        "made": options.made,
    }


def staged_entries(options: CopyOptions) -> dict[str, dict[str, Any]]:
    """Every journal entry in staging made as ``options`` make files now, by stage key (the
    driver reads them once per run; unreadable parts and lines are skipped: their files are
    copied again)."""
    fs = options.target.fs
    made = options.made
    found: dict[str, dict[str, Any]] = {}
    try:
        infos = fs.get_file_info(_selector(options.staging))
    except (FileNotFoundError, OSError):
        return found
    for info in infos:
        if not info.path.endswith(".jsonl"):
            continue
        try:
            with fs.open_input_stream(info.path, compression=None) as raw:
                lines = raw.read().decode().splitlines()
        except (FileNotFoundError, OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("made") == made and "key" in entry:
                found[str(entry["key"])] = entry
    return found


def _selector(path: str) -> Any:
    from pyarrow import fs as pafs

    return pafs.FileSelector(path, allow_not_found=True, recursive=False)


def reusable(options: CopyOptions, item: CopyItem, entry: dict[str, Any] | None) -> Copied | None:
    """The file of ``item`` as staged by an earlier run, if its entry's outputs are all there
    with their sizes."""
    if entry is None:
        return None
    fs = options.target.fs
    for name, size in entry.get("staged", []):
        path = staged_path(options, item.file.stage_key, name)
        if options.target.local:
            try:
                found = os.stat(path).st_size
            except OSError:
                return None
        else:
            found = fs.get_file_info(path).size
        if found != size:
            return None
    return copied(
        item, REUSED, outputs=[(o, n) for o, n in entry["outputs"]], staged=[(o, n) for o, n in entry["staged"]]
    )


def marker_path(options: CopyOptions, key: str, block: int) -> str:
    """The marker of one copied block of a split file."""
    return f"{options.staging}/{key}.part{block}.json"


def staged_path(options: CopyOptions, key: str, name: str) -> str:
    return staged_file(options.staging, key, name)


def staged_file(staging: str, key: str, name: str) -> str:
    """Where an output is staged: ``<key>`` for a file's single output (``name`` empty), else
    ``<key>/<name>`` (an archive's members)."""
    return f"{staging}/{key}/{name}" if name else f"{staging}/{key}"


def read_block_marker(options: CopyOptions, key: str, block: int, span: list[int]) -> bool:
    """Whether block ``block`` of a split file was copied by an earlier run over the same range
    into the staged file that is there now (its inode: a file staged whole, or again, since is
    another file)."""
    try:
        with open(marker_path(options, key, block), "rb") as raw:
            marker: dict[str, Any] = json.loads(raw.read())
        inode = os.stat(staged_path(options, key, "")).st_ino
    except (OSError, ValueError):
        return False
    return bool(marker.get("made") == options.made and marker.get("range") == span and marker.get("ino") == inode)
