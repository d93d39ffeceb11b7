"""Copying files on executors (Gobblin's FileAwareInputStreamDataWriter). No Spark here: the
runtime ships :func:`copy_items` to Spark tasks, each with a bin of files balanced by size.

Each file streams through a fixed-size buffer (and the byte transforms) into staging next to the
target: ``<target root>/_engine_staging/<job>.<dag>/<stage key>`` (an archive's members under
``<stage key>/``). Then sizes are checked (the bytes read against the listing, the staged files
against the bytes written), the checksum when asked (the staged copy is read back), and
attributes are set. Each task keeps a *journal* of the files it finished: JSON lines in
``<staging>/<token>.<n>.jsonl``, written every :data:`JOURNAL_EVERY` files or
:data:`JOURNAL_SECONDS` and when the task ends, each part written whole (temporary name, then a
rename). Before copying, the driver reads the journals (:func:`staged_entries`): a file with an
entry made the same way whose staged outputs are intact is *reused*, not copied again. A file
that fails leaves no staged bytes behind (disk space) and no entry, and its message names the
file. One staging file per copied file and one journal write per many files keep small files
cheap (``cp`` creates only the file).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import posixpath
import shutil
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.copy.fs import Location
from engine.copy.listing import CopyableFile
from engine.copy.transforms import is_identity, outputs
from engine.spec.transforms import TransformConf

REUSED, COPIED, FAILED = "reused", "copied", "failed"


@dataclass(frozen=True)
class CopyOptions:
    """What every file of a copy DAG shares (shipped once per task)."""

    source: Location
    target: Location
    staging: str
    """Path of the DAG's staging directory within the target file system."""
    chain: tuple[TransformConf, ...] = ()
    checksum: str = "none"
    buffer_size: int = 1 << 20
    permissions: int | None = None
    preserve_permissions: bool = False
    preserve_mtime: bool = False
    uid: int = -1
    gid: int = -1

    @functools.cached_property
    def recipe(self) -> str:
        """How a copy is made besides the source file (whose guid is in the stage key): the
        transforms (an encrypt's recipients, a gzip's level, ...) and the attributes. Recorded in
        the manifest with each published file, so a changed config copies the files again; secrets
        are masked in the dump: a changed passphrase alone goes unnoticed. Computed once (a task
        journals it with every file: 6 us a file)."""
        made = {
            "chain": [t.model_dump(mode="json") for t in self.chain],
            "attributes": [self.permissions, self.preserve_permissions, self.preserve_mtime],
            "owner": [self.uid, self.gid],
        }
        return hashlib.sha1(json.dumps(made, sort_keys=True).encode()).hexdigest()

    @functools.cached_property
    def made(self) -> str:
        """What a staged file depends on: :attr:`recipe` and the staging layout. A file staged by a
        run that failed is reused only if the next run would stage the same."""
        return hashlib.sha1(f"{LAYOUT}:{self.recipe}".encode()).hexdigest()


@dataclass(frozen=True)
class CopyItem:
    file: CopyableFile
    target_root: str
    """The dataset's target root (within the target file system), for the permission pre-check."""
    block: tuple[int, int, int] | None = None
    """``(index, offset, length)`` of a block of a split file."""
    cleared: bool = False
    """A file at the target stands where this file's directory goes, and this batch deletes it
    before publishing (the writability check lets it be)."""


@dataclass
class Copied:
    key: str
    dataset: str
    file_set: str
    relative: str
    status: str
    outputs: list[tuple[str, int]] = field(default_factory=list)
    """``(path relative to the dataset's target root, size)``."""
    staged: list[tuple[str, int]] = field(default_factory=list)
    """``(name below the file's staging directory, size)`` of each output, in the same order."""
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    error: str = ""
    block: int | None = None


JOURNAL_EVERY = 512
JOURNAL_SECONDS = 2.0
LAYOUT = 2
"""Staging layout version, part of every entry's ``made``: entries of another layout are ignored."""


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
            _write_whole(self.options, path, body)
            self.parts += 1


def _write_whole(options: CopyOptions, path: str, body: bytes) -> None:
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
    return _result(
        item, REUSED, outputs=[(o, n) for o, n in entry["outputs"]], staged=[(o, n) for o, n in entry["staged"]]
    )


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
                done = _result(item, FAILED, error=f"{options.source.display(item.file.path)}: {_first_line(exc)}")
            done.seconds = time.monotonic() - started
            if done.status == COPIED and item.block is None:
                journal.add(_entry(options, item.file, done.staged, done.outputs))
            progress(1 if item.block is None or done.status == FAILED else 0, done.bytes_read)
            yield done
    finally:
        journal.flush()


def _entry(
    options: CopyOptions, f: CopyableFile, staged: list[tuple[str, int]], outs: list[tuple[str, int]]
) -> dict[str, Any]:
    return {
        "key": f.stage_key,
        "guid": f.guid,
        "staged": [[o, n] for o, n in staged],
        "outputs": [[o, n] for o, n in outs],
        "made": options.made,
    }


def _make_dir(options: CopyOptions, path: str) -> None:
    if options.target.local:
        os.makedirs(path, exist_ok=True)
    else:
        options.target.fs.create_dir(path, recursive=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _result(item: CopyItem, status: str, **kw: Any) -> Copied:
    f = item.file
    return Copied(
        f.stage_key, f.dataset, f.file_set, f.relative, status, block=item.block[0] if item.block else None, **kw
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


def _copy(options: CopyOptions, item: CopyItem, writable: set[str]) -> Copied:
    f = item.file
    if item.block is not None:
        index, offset, length = item.block
        if read_block_marker(options, f.stage_key, index, [offset, length]):
            return _result(item, REUSED)
        _check_writable(options, item, writable)
        return _copy_block(options, item)
    unpacking = _unpacking(options)
    if unpacking:
        _discard(options, item)  # an earlier attempt's members
    _check_writable(options, item, writable)
    final = staged_path(options, f.stage_key, "")
    # A single output is written under a name of this attempt's own and renamed into place once
    # checked: a second attempt of the task (a retry, speculation) never truncates or deletes the
    # staged file another attempt produced.
    tmp = None if unpacking else f"{final}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        outs, read = _write_staged(options, f, tmp)
        _unchanged(options, f, read)
        for out_name, size, digest in outs:
            _verify(options, f, tmp or staged_path(options, f.stage_key, out_name), size, digest)
        _attributes(options, f, [tmp] if tmp else [staged_path(options, f.stage_key, o) for o, _, _ in outs])
        if tmp is not None:
            _rename(options, tmp, final)
            tmp = None
    finally:
        if tmp is not None:
            _remove(options, tmp)
    single = posixpath.basename(f.target)
    directory = posixpath.dirname(f.relative)
    results = [(posixpath.join(directory, o or single), n) for o, n, _ in outs]
    return _result(
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


def _unpacking(options: CopyOptions) -> bool:
    return any(t.type in ("untar", "unzip") for t in options.chain)


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
        unpacking = _unpacking(options)
        for o in outputs(posixpath.basename(f.path), counting, list(options.chain), buffer_size=options.buffer_size):  # type: ignore[arg-type]
            name = o.name if unpacking else ""
            path = single if single is not None and not unpacking else staged_path(options, f.stage_key, name)
            if unpacking:
                fs.create_dir(posixpath.dirname(path), recursive=True)
            hasher = _hasher(options.checksum)
            size = 0
            with fs.open_output_stream(path, compression=None) as sink:
                while chunk := o.stream.read(options.buffer_size):
                    sink.write(chunk)
                    size += len(chunk)
                    if hasher is not None:
                        hasher.update(chunk)
            out.append((name, size, _digest(hasher)))
            if o.mode is not None or o.mtime is not None:
                _member_attributes(options, path, o.mode, o.mtime)
        while counting.read(options.buffer_size):  # an archive's trailing blocks: count the whole file
            pass
    return out, counting.count


def _unchanged(options: CopyOptions, f: CopyableFile, read: int) -> None:
    """Fail the copy if the source changed while it was read (appended, truncated, rewritten)."""
    if options.source.local:
        st = os.stat(f.path)
        size, mtime_ns = st.st_size, st.st_mtime_ns
    else:
        info = options.source.fs.get_file_info(f.path)
        size, mtime_ns = info.size, info.mtime_ns
    if read != f.size or size != f.size or mtime_ns != f.mtime_ns:
        raise OSError(
            f"read {read} bytes, the listing said {f.size} (now {size} bytes): the file changed while being copied"
        )


def _copy_block(options: CopyOptions, item: CopyItem) -> Copied:
    """One block range of a split file, written at its offset into the staged file (local targets)."""
    f = item.file
    assert item.block is not None
    index, offset, length = item.block
    path = staged_path(options, f.stage_key, "")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    source_hash, done = _hasher(options.checksum), 0
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
        staged_hash = _hasher(options.checksum)
        assert staged_hash is not None
        with open(path, "rb") as staged:
            staged.seek(offset)
            left = length
            while left and (chunk := staged.read(min(options.buffer_size, left))):
                staged_hash.update(chunk)
                left -= len(chunk)
        if _digest(staged_hash) != _digest(source_hash):
            raise OSError(f"{options.checksum} of block {index} differs between the source and the staged copy")
    inode = os.stat(path).st_ino
    _write_whole(
        options,
        marker_path(options, f.stage_key, index),
        json.dumps({"guid": f.guid, "range": [offset, length], "ino": inode, "made": options.made}).encode(),
    )
    return _result(item, COPIED, bytes_read=done, bytes_written=done)


def finish_split(options: CopyOptions, f: CopyableFile, blocks: int) -> list[tuple[str, int]]:
    """After every block of ``f`` is copied: check the staged file's size, set its attributes and
    journal it (the driver calls this)."""
    path = staged_path(options, f.stage_key, "")
    size = os.path.getsize(path)
    if size != f.size:
        raise OSError(f"{options.source.display(f.path)}: the staged copy has {size} bytes, the source {f.size}")
    _attributes(options, f, [path])
    outs = [(f.target, size)]
    journal = Journal(options)
    journal.add(_entry(options, f, [("", size)], outs))
    journal.flush()
    for index in range(blocks):  # the joined file's entry replaces the blocks' markers
        with contextlib.suppress(FileNotFoundError):
            os.remove(marker_path(options, f.stage_key, index))
    return outs


def _discard(options: CopyOptions, item: CopyItem) -> None:
    """Remove what a failed or interrupted unpacking of ``item`` left in staging (a single
    output's temporary file is removed by the attempt that wrote it)."""
    if item.block is not None or not _unpacking(options):
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


def _check_writable(options: CopyOptions, item: CopyItem, checked: set[str]) -> None:
    """Fail early, before any byte is copied, when the target directory cannot be written
    (checked once per directory and task)."""
    if not options.target.local:
        return
    directory = posixpath.dirname(posixpath.join(item.target_root, item.file.target))
    if directory in checked:
        return
    probe = directory
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    while item.cleared and probe and os.path.exists(probe) and not os.path.isdir(probe):
        probe = os.path.dirname(probe)  # the file in the way goes before the publish: check its parent
    if probe and (not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK)):
        what = "is not a directory" if not os.path.isdir(probe) else "is not writable"
        raise PermissionError(f"cannot publish into {directory}: {probe} {what}")
    checked.add(directory)


def _hasher(algorithm: str) -> Any | None:
    if algorithm == "none":
        return None
    if algorithm == "crc32":
        return _Crc32()
    return hashlib.new(algorithm)


def _digest(hasher: Any | None) -> str:
    return "" if hasher is None else str(hasher.hexdigest())


class _Crc32:
    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


def _verify(options: CopyOptions, f: CopyableFile, path: str, size: int, digest: str) -> None:
    found = os.stat(path).st_size if options.target.local else options.target.fs.get_file_info(path).size
    if found != size:
        raise OSError(f"the staged copy {options.target.display(path)} has {found} bytes, {size} were written")
    if options.checksum == "none":
        return
    hasher = _hasher(options.checksum)
    assert hasher is not None
    with options.target.fs.open_input_stream(path, compression=None) as staged:
        while chunk := staged.read(options.buffer_size):
            hasher.update(chunk)
    if _digest(hasher) != digest:  # of the bytes streamed: the source's own for a plain copy
        what = "the source" if is_identity(list(options.chain)) else "the bytes written"
        raise OSError(f"{options.checksum} of the staged copy differs from {what}'s: {_digest(hasher)} != {digest}")


def _attributes(options: CopyOptions, f: CopyableFile, paths: list[str]) -> None:
    if not options.target.local:
        return
    mode = options.permissions
    if mode is None and options.preserve_permissions and options.source.local:
        mode = os.stat(f.path).st_mode & 0o7777
    for path in paths:
        if mode is not None:
            os.chmod(path, mode)
        if options.uid != -1 or options.gid != -1:
            os.chown(path, options.uid, options.gid)
        if options.preserve_mtime and not _unpacking(options):
            os.utime(path, ns=(f.mtime_ns, f.mtime_ns))


def _member_attributes(options: CopyOptions, path: str, mode: int | None, mtime: float | None) -> None:
    if not options.target.local:
        return
    if options.preserve_permissions and mode is not None and options.permissions is None:
        os.chmod(path, mode & 0o7777)
    if options.preserve_mtime and mtime is not None:
        os.utime(path, (mtime, mtime))
