"""Copying files on executors (Gobblin's FileAwareInputStreamDataWriter). No Spark here: the
runtime ships :func:`copy_items` to Spark tasks, each with a bin of files balanced by size.

Each file streams through a fixed-size buffer (and the byte transforms) into staging next to the
target: ``<target root>/_engine_staging/<job>.<dag>/<stage key>`` (an archive's members under
``<stage key>/``). Then sizes are checked (the bytes read against the listing, the staged files
against the bytes written), the checksum when asked (the staged copy is read back), and
attributes are set (:mod:`engine.copy.checks`). Each task journals the files it finished, so that
the next run reuses them (:mod:`engine.copy.staging`). A file that fails leaves no staged bytes
behind (disk space) and no journal entry, and its message names the file. One staging file per
copied file and one journal write per many files keep small files cheap (``cp`` creates only the
file).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from engine.copy.checks import (
    check_unchanged,
    check_writable,
    hex_digest,
    new_hasher,
    set_attributes,
    set_member_attributes,
    verify_staged,
)
from engine.copy.listing import CopyableFile
from engine.copy.options import COPIED, FAILED, REUSED, Copied, CopyItem, CopyOptions, copied
from engine.copy.staging import (
    Journal,
    journal_entry,
    marker_path,
    read_block_marker,
    reusable,
    staged_entries,
    staged_path,
    write_whole,
)
from engine.copy.transforms import is_identity, outputs

__all__ = [  # the options and outcomes too: the runtime imports them from here
    "COPIED",
    "FAILED",
    "REUSED",
    "Copied",
    "CopyItem",
    "CopyOptions",
    "copy_items",
    "finish_split",
    "reusable",
    "staged_entries",
]


def copy_items(
    options: CopyOptions, items: Iterable[CopyItem], progress: Callable[[int, int], None] = lambda files, b: None
) -> Iterator[Copied]:
    """Copy each item; one failing does not stop the others. ``progress(files, bytes)`` after each."""
    journal = Journal(options)
    writable: set[str] = set()
    staging_made = False
    try:
        for item in items:
            started = time.monotonic()
            try:
                if not staging_made:  # once per task (a failure here fails the file, named)
                    _make_dir(options, options.staging)
                    staging_made = True
                done = _copy(options, item, writable)
            except Exception as exc:
                _discard(options, item)
                done = copied(item, FAILED, error=f"{options.source.display(item.file.path)}: {_first_line(exc)}")
            done.seconds = time.monotonic() - started
            if done.status == COPIED and item.block is None:
                journal.add(journal_entry(options, item.file, done.staged, done.outputs))
            progress(1 if item.block is None or done.status == FAILED else 0, done.bytes_read)
            yield done
    finally:
        journal.flush()


def _make_dir(options: CopyOptions, path: str) -> None:
    if options.target.local:
        os.makedirs(path, exist_ok=True)
    else:
        options.target.fs.create_dir(path, recursive=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _copy(options: CopyOptions, item: CopyItem, writable: set[str]) -> Copied:
    f = item.file
    if item.block is not None:
        index, offset, length = item.block
        if read_block_marker(options, f.stage_key, index, [offset, length]):
            return copied(item, REUSED)
        check_writable(options, item, writable)
        return _copy_block(options, item)
    unpacking = options.unpacks
    if unpacking:
        _discard(options, item)  # an earlier attempt's members
    check_writable(options, item, writable)
    final = staged_path(options, f.stage_key, "")
    # A single output is written under a name of this attempt's own and renamed into place once
    # checked: a second attempt of the task (a retry, speculation) never truncates or deletes the
    # staged file another attempt produced.
    tmp = None if unpacking else f"{final}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        outs, read = _write_staged(options, f, tmp)
        check_unchanged(options, f, read)
        for out_name, size, digest in outs:
            verify_staged(options, f, tmp or staged_path(options, f.stage_key, out_name), size, digest)
        set_attributes(options, f, [tmp] if tmp else [staged_path(options, f.stage_key, o) for o, _, _ in outs])
        if tmp is not None:
            _rename(options, tmp, final)
            tmp = None
    finally:
        if tmp is not None:
            _remove(options, tmp)
    single = posixpath.basename(f.target)
    directory = posixpath.dirname(f.relative)
    results = [(posixpath.join(directory, o or single), n) for o, n, _ in outs]
    return copied(
        item,
        COPIED,
        outputs=results,
        staged=[(o, n) for o, n, _ in outs],
        bytes_read=read,
        bytes_written=sum(n for _, n, _ in outs),
    )


def _write_staged(options: CopyOptions, f: CopyableFile, tmp: str | None) -> tuple[list[tuple[str, int, str]], int]:
    """Write ``f``'s outputs (a single one at ``tmp``): the kernel's copy for a local plain copy
    without checksum (``sendfile``/``copy_file_range``, as ``cp``), else streamed."""
    fast = (
        tmp is not None
        and is_identity(list(options.chain))
        and options.source.local
        and options.target.local
        and options.checksum == "none"
    )
    if not fast:
        return _stream(options, f, tmp)
    assert tmp is not None
    shutil.copyfile(f.path, tmp)
    written = os.path.getsize(tmp)
    if written != f.size:
        raise OSError(f"read {written} bytes, the listing said {f.size}: the file changed while being copied")
    return [("", written, "")], written


def _rename(options: CopyOptions, src: str, dst: str) -> None:
    if options.target.local:
        os.replace(src, dst)
    else:
        options.target.fs.move(src, dst)


def _remove(options: CopyOptions, path: str) -> None:
    with contextlib.suppress(OSError):
        if options.target.local:
            os.remove(path)
        else:
            options.target.fs.delete_file(path)


class _Counting:
    """A readable that counts the bytes read through it."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.raw.read(n)
        self.count += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.raw.close()


def _stream(options: CopyOptions, f: CopyableFile, single: str | None) -> tuple[list[tuple[str, int, str]], int]:
    """Stream ``f`` through the transforms into staging (a single output at ``single``, an
    archive's members below its staging directory): ``[(output name, size, checksum)]``, bytes read."""
    fs = options.target.fs
    out: list[tuple[str, int, str]] = []
    with options.source.fs.open_input_stream(f.path, compression=None) as raw:
        counting = _Counting(raw)
        unpacking = options.unpacks
        for o in outputs(posixpath.basename(f.path), counting, list(options.chain), buffer_size=options.buffer_size):  # type: ignore[arg-type]
            name = o.name if unpacking else ""
            path = single if single is not None and not unpacking else staged_path(options, f.stage_key, name)
            if unpacking:
                fs.create_dir(posixpath.dirname(path), recursive=True)
            hasher = new_hasher(options.checksum)
            size = 0
            with fs.open_output_stream(path, compression=None) as sink:
                while chunk := o.stream.read(options.buffer_size):
                    sink.write(chunk)
                    size += len(chunk)
                    if hasher is not None:
                        hasher.update(chunk)
            out.append((name, size, hex_digest(hasher)))
            if o.mode is not None or o.mtime is not None:
                set_member_attributes(options, path, o.mode, o.mtime)
        while counting.read(options.buffer_size):  # an archive's trailing blocks: count the whole file
            pass
    return out, counting.count


def _copy_block(options: CopyOptions, item: CopyItem) -> Copied:
    """One block range of a split file, written at its offset into the staged file (local targets)."""
    f = item.file
    assert item.block is not None
    index, offset, length = item.block
    path = staged_path(options, f.stage_key, "")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    source_hash, done = new_hasher(options.checksum), 0
    try:
        with options.source.fs.open_input_file(f.path) as src:
            src.seek(offset)
            while done < length:
                chunk = src.read(min(options.buffer_size, length - done))
                if not chunk:
                    raise OSError(f"the file ended at {offset + done} bytes, the listing said {f.size}")
                os.pwrite(fd, chunk, offset + done)
                done += len(chunk)
                if source_hash is not None:
                    source_hash.update(chunk)
    finally:
        os.close(fd)
    if source_hash is not None:
        staged_hash = new_hasher(options.checksum)
        assert staged_hash is not None
        with open(path, "rb") as staged:
            staged.seek(offset)
            left = length
            while left and (chunk := staged.read(min(options.buffer_size, left))):
                staged_hash.update(chunk)
                left -= len(chunk)
        if hex_digest(staged_hash) != hex_digest(source_hash):
            raise OSError(f"{options.checksum} of block {index} differs between the source and the staged copy")
    inode = os.stat(path).st_ino
    write_whole(
        options,
        marker_path(options, f.stage_key, index),
        json.dumps({"guid": f.guid, "range": [offset, length], "ino": inode, "made": options.made}).encode(),
    )
    return copied(item, COPIED, bytes_read=done, bytes_written=done)


def finish_split(options: CopyOptions, f: CopyableFile, blocks: int) -> list[tuple[str, int]]:
    """After every block of ``f`` is copied: check the staged file's size, set its attributes and
    journal it (the driver calls this)."""
    path = staged_path(options, f.stage_key, "")
    size = os.path.getsize(path)
    if size != f.size:
        raise OSError(f"{options.source.display(f.path)}: the staged copy has {size} bytes, the source {f.size}")
    set_attributes(options, f, [path])
    outs = [(f.target, size)]
    journal = Journal(options)
    journal.add(journal_entry(options, f, [("", size)], outs))
    journal.flush()
    for index in range(blocks):  # the joined file's entry replaces the blocks' markers
        with contextlib.suppress(FileNotFoundError):
            os.remove(marker_path(options, f.stage_key, index))
    return outs


def _discard(options: CopyOptions, item: CopyItem) -> None:
    """Remove what a failed or interrupted unpacking of ``item`` left in staging (a single
    output's temporary file is removed by the attempt that wrote it)."""
    if item.block is not None or not options.unpacks:
        return
    path = staged_path(options, item.file.stage_key, "")
    try:
        if options.target.local:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            except (IsADirectoryError, PermissionError):  # an archive's members (EISDIR, or EPERM)
                shutil.rmtree(path, ignore_errors=True)
            return
        fs = options.target.fs
        info = fs.get_file_info(path)
        if info.type.name == "Directory":
            fs.delete_dir(path)
        elif info.type.name == "File":
            fs.delete_file(path)
    except OSError:
        pass
