"""Byte transforms of a copy job: a chain of steps applied to a file's bytes while they are copied.

Every step is a generator from byte chunks to byte chunks, pulled by whoever reads the output: a
file is never held whole in memory (a zip archive read from a non-seekable stream is spooled to a
temporary file, as its directory is at its end). ``gunzip``/``gzip``/``decrypt``/``encrypt`` turn
one stream into one; ``untar``/``unzip`` turn one into one per regular member, and the steps after
them apply to each member.
"""

from __future__ import annotations

import bz2
import calendar
import itertools
import logging
import lzma
import posixpath
import re
import stat
import struct
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, BinaryIO, NamedTuple, Protocol

from typing_extensions import Self

from engine.copy import TransformError, age_encryption, chunk_stream, read_chunks
from engine.spec.transforms import (
    DecryptConf,
    EncryptConf,
    GunzipConf,
    GzipConf,
    TransformConf,
    UntarConf,
    UnzipConf,
    check_chain,
)

__all__ = ["Output", "TransformError", "is_identity", "outputs", "renamed"]

log = logging.getLogger(__name__)

SPOOL_IN_MEMORY = 64 << 20
"""A zip read from a non-seekable stream is spooled in memory up to this size, then to disk."""
_TAR_EXTENSIONS = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".tbz", ".txz", ".tar")
_FORMAT_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, NotImplementedError)
"""What the standard library raises on a corrupt archive or member (not I/O errors of the source)."""


@dataclass(frozen=True)
class Output:
    """One file a source file becomes."""

    name: str
    """POSIX path relative to the source file's destination directory (``a.csv``, ``data/x/y.txt``)."""
    stream: BinaryIO
    """Its bytes; read it to the end before asking for the next output."""
    mode: int | None = None
    """Permission bits of an archive member, if known."""
    mtime: float | None = None
    """Modification time (seconds since the epoch) of an archive member, if known."""


class _Member(NamedTuple):
    name: str
    chunks: Iterator[bytes]
    mode: int | None
    mtime: float | None


# -- names --------------------------------------------------------------------------------------


def renamed(name: str, chain: Sequence[TransformConf]) -> str:
    """The output name of a file after ``chain``: gunzip drops ``.gz`` (``.tgz`` -> ``.tar``), gzip
    adds ``.gz``, decrypt drops ``.age``, encrypt adds ``.age``. For an unpacking chain, the
    directory the members go into (``into = stem``: the archive's name without its archive
    extensions) or ``""`` (``into = parent``)."""
    for step in chain:
        if isinstance(step, (UntarConf, UnzipConf)):
            return _stem(name, step) if step.into == "stem" else ""
        name = _renamed_by(name, step)
    return name


def _renamed_by(name: str, step: TransformConf) -> str:
    if isinstance(step, GunzipConf):
        return name[:-4] + ".tar" if name.lower().endswith(".tgz") else _without(name, ".gz")
    if isinstance(step, DecryptConf):
        return _without(name, ".age")
    return name + (".gz" if isinstance(step, GzipConf) else ".age")


def _stem(name: str, step: UntarConf | UnzipConf) -> str:
    for extension in _TAR_EXTENSIONS if isinstance(step, UntarConf) else (".zip",):
        stem = _without(name, extension)
        if stem != name:
            return stem
    return name


def _without(name: str, suffix: str) -> str:
    """``name`` without ``suffix`` (any case), unless that leaves nothing."""
    return name[: -len(suffix)] if name.lower().endswith(suffix) and len(name) > len(suffix) else name


def is_identity(chain: Sequence[TransformConf]) -> bool:
    """No transforms: callers copy the bytes as they are (and can compare checksums)."""
    return not chain


# -- the chain ----------------------------------------------------------------------------------


def outputs(
    name: str, stream: BinaryIO, chain: Sequence[TransformConf], *, buffer_size: int = 1 << 20
) -> Iterator[Output]:
    """Apply ``chain`` to the source file ``name`` (its base name) read from ``stream``.

    Without unpacking, exactly one :class:`Output`. ``untar``/``unzip`` yield one per regular
    member in archive order, each through the steps after the unpacking. Corrupt input (bad gzip
    CRC, truncated archive, wrong key, unsafe member path) raises :class:`TransformError`, at the
    latest when the output's stream reaches its end.
    """
    check_chain(chain)
    steps = list(chain)
    if not steps:
        yield Output(name, stream)
        return
    at = next((i for i, s in enumerate(steps) if isinstance(s, (UntarConf, UnzipConf))), None)
    if at is None:
        chunks = _piped(read_chunks(stream, buffer_size), steps, buffer_size)
        yield Output(renamed(name, steps), chunk_stream(chunks, buffer_size))
    else:
        yield from _unpacked(name, stream, steps, at, buffer_size)


def _unpacked(name: str, stream: BinaryIO, steps: list[TransformConf], at: int, size: int) -> Iterator[Output]:
    """The members of the archive ``steps[at]`` unpacks, each through the steps after it."""
    pre, unpack, post = steps[:at], steps[at], steps[at + 1 :]
    folder = renamed(name, steps[: at + 1])
    source = _piped(read_chunks(stream, size), pre, size)
    if isinstance(unpack, UntarConf):
        members = _untar(name, source, size)
    else:  # zip needs random access: the source itself if nothing came before and it can seek
        members = _unzip(name, source, None if pre else stream, size)
    for member in members:
        path = posixpath.join(folder, member.name) if folder else member.name
        chunks = _piped(member.chunks, post, size)
        yield Output(renamed(path, post), chunk_stream(chunks, size), member.mode, member.mtime)


def _piped(chunks: Iterator[bytes], steps: Sequence[TransformConf], size: int) -> Iterator[bytes]:
    for step in steps:
        chunks = _step(chunks, step, size)
    return chunks


def _step(chunks: Iterator[bytes], step: TransformConf, size: int) -> Iterator[bytes]:
    if isinstance(step, GunzipConf):
        return _gunzip(chunks, size)
    if isinstance(step, GzipConf):
        return _gzip(chunks, step.level)
    if isinstance(step, EncryptConf):
        passphrase = step.passphrase.get_secret_value() if step.passphrase else None
        return age_encryption.encrypt_chunks(chunks, step.recipients, passphrase, work_factor=step.work_factor)
    if isinstance(step, DecryptConf):
        passphrase = step.passphrase.get_secret_value() if step.passphrase else None
        return age_encryption.decrypt_chunks(chunks, [i.get_secret_value() for i in step.identities], passphrase)
    raise TypeError(f"not a stream transform: {step.type}")


# -- compression --------------------------------------------------------------------------------


def _gzip(chunks: Iterator[bytes], level: int) -> Iterator[bytes]:
    # zlib's own gzip header: no name, mtime 0; the same input gives the same bytes.
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    for chunk in chunks:
        if out := compressor.compress(chunk):
            yield out
    yield compressor.flush()


def _gunzip(chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    """Every member of a gzip stream, CRC and length checked; output ``size`` bytes at a time at most
    (a small input that expands hugely is never held at once)."""
    decompressor: zlib._Decompress | None = None
    members, data, more = 0, b"", False
    while True:
        if not data and not more:
            data = next(chunks, b"")
            if not data:
                break
        if decompressor is None:
            data = data.lstrip(b"\0") if members else data  # zero padding after a member is allowed
            if not data:
                continue
            decompressor = zlib.decompressobj(31)
        try:
            out = decompressor.decompress(data, size)
        except zlib.error as exc:
            raise TransformError(f"corrupt gzip data ({_zlib_reason(exc)})") from exc
        more, data = len(out) == size, decompressor.unconsumed_tail
        if out:
            yield out
        if decompressor.eof:
            members, data, more = members + 1, decompressor.unused_data, False
            decompressor = None
    if decompressor is not None:
        raise TransformError("truncated gzip data: the input ends inside a member")
    if not members:
        raise TransformError("empty input is not gzip data")


def _zlib_reason(exc: zlib.error) -> str:
    # "Error -3 while decompressing data: incorrect header check" -> "incorrect header check"
    return str(exc).rpartition(": ")[2] or str(exc)


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


def _decompressed(chunks: Iterator[bytes], new: Callable[[], _Decompressor], what: str, size: int) -> Iterator[bytes]:
    """bzip2 or xz data (concatenated streams too) decompressed, ``size`` bytes at a time at most."""
    decompressor = new()
    while True:
        if decompressor.eof:
            data, decompressor = decompressor.unused_data, new()
            data = data or next(chunks, b"")
            if not data:
                return
        elif decompressor.needs_input:
            data = next(chunks, b"")
            if not data:
                raise TransformError(f"truncated {what} data: the input ends inside a stream")
        else:
            data = b""
        try:
            out = decompressor.decompress(data, size)
        except (OSError, EOFError, lzma.LZMAError) as exc:  # bz2 reports bad data as OSError
            raise TransformError(f"corrupt {what} data ({exc})") from exc
        if out:
            yield out


_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")


def _uncompressed(chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    """``chunks`` decompressed if they start as gzip, bzip2 or xz data (a compressed tar), else as they are."""
    head, chunks = _peek(chunks, 10)
    if head.startswith(b"\x1f\x8b\x08"):
        return _gunzip(chunks, size)
    if _BZIP2.match(head):
        return _decompressed(chunks, bz2.BZ2Decompressor, "bzip2", size)
    if head.startswith(b"\xfd7zXZ\x00"):
        return _decompressed(chunks, lzma.LZMADecompressor, "xz", size)
    return chunks


def _peek(chunks: Iterator[bytes], n: int) -> tuple[bytes, Iterator[bytes]]:
    """(the first ``n`` bytes, or fewer at the end; all of ``chunks`` still to read)."""
    taken, head = [], b""
    while len(head) < n and (chunk := next(chunks, None)) is not None:
        taken.append(chunk)
        head += chunk[: n - len(head)]
    return head, itertools.chain(taken, chunks)


# -- archives -----------------------------------------------------------------------------------


def _member_path(name: str) -> str:
    """A member's path, normalized (no ``.``, no empty parts); TransformError if it could escape."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", name) or not parts:
        raise TransformError(f"member {name!r} has an unsafe path (absolute, with '..', or empty)")
    return "/".join(parts)


def _guarded(file: IO[bytes], size: int, member: str) -> Iterator[bytes]:
    """The bytes of an archive member; a corrupt member raises TransformError naming it."""
    try:
        while chunk := file.read(size):
            yield chunk
    except _FORMAT_ERRORS as exc:
        raise TransformError(f"member {member!r}: {exc}") from exc


class _StrictTarInfo(tarfile.TarInfo):
    """A tar header that fails on a short block: tarfile takes the end of input for the end of the
    archive, so a tar cut at a header would read as complete."""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        if len(buf) != tarfile.BLOCKSIZE:
            raise tarfile.ReadError("truncated tar archive: the input ends before the end-of-archive marker")
        return super().frombuf(buf, encoding, errors)


def _untar(name: str, chunks: Iterator[bytes], size: int) -> Iterator[_Member]:
    with _tar(chunk_stream(_uncompressed(chunks, size), size), size) as archive:
        while (member := _next_member(archive)) is not None:
            if member.isdir():
                continue
            if not member.isfile():
                log.info("%s: skipped %s member %r (only regular files are unpacked)", name, _kind(member), member.name)
                continue
            path = _member_path(member.name)
            file = archive.extractfile(member)
            assert file is not None  # a regular member has a file
            yield _Member(path, _guarded(file, size, path), stat.S_IMODE(member.mode), float(member.mtime))


def _tar(source: BinaryIO, size: int) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=source, mode="r|", tarinfo=_StrictTarInfo, bufsize=size)
    except _FORMAT_ERRORS as exc:
        raise TransformError(f"not a tar archive ({exc})") from exc


def _next_member(archive: tarfile.TarFile) -> tarfile.TarInfo | None:
    try:
        return archive.next()
    except _FORMAT_ERRORS as exc:
        raise TransformError(f"corrupt tar archive ({exc})") from exc


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hard link"
    return "device" if member.isdev() else "special"


def _unzip(name: str, chunks: Iterator[bytes], stream: BinaryIO | None, size: int) -> Iterator[_Member]:
    with _random_access(chunks, stream) as file:
        try:
            archive = zipfile.ZipFile(file)
        except _FORMAT_ERRORS as exc:
            raise TransformError(f"not a zip archive ({exc})") from exc
        with archive:
            for info in archive.infolist():
                unix = info.external_attr >> 16 if info.create_system == 3 else 0
                if info.is_dir() or stat.S_ISDIR(unix):
                    continue
                if stat.S_IFMT(unix) and not stat.S_ISREG(unix):  # some zips carry permission bits only
                    kind = "symlink" if stat.S_ISLNK(unix) else "special"
                    log.info("%s: skipped %s member %r (only regular files are unpacked)", name, kind, info.filename)
                    continue
                path = _member_path(info.filename)
                with _zip_member(archive, info, path) as member:
                    yield _Member(path, _guarded(member, size, path), stat.S_IMODE(unix) or None, _zip_mtime(info))


@contextmanager
def _zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> Iterator[IO[bytes]]:
    if info.flag_bits & 0x1:
        raise TransformError(f"member {path!r} is encrypted (password-protected zip members are not supported)")
    try:
        member = archive.open(info)
    except _FORMAT_ERRORS as exc:
        raise TransformError(f"member {path!r}: {exc}") from exc
    with member:
        yield member


@contextmanager
def _random_access(chunks: Iterator[bytes], stream: BinaryIO | None) -> Iterator[IO[bytes]]:
    """``stream`` if it can seek, else ``chunks`` spooled to a temporary file (memory, then disk)."""
    seekable = getattr(stream, "seekable", None)
    if stream is not None and seekable is not None and seekable():
        yield stream
        return
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        for chunk in chunks:
            spool.write(chunk)
        spool.seek(0)
        yield spool


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    """The member's UTC mtime from its extended-timestamp field, else its DOS time read as UTC."""
    extra, i = info.extra, 0
    while i + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, i)
        if tag == 0x5455 and length >= 5 and i + 9 <= len(extra) and extra[i + 4] & 1:
            return float(struct.unpack_from("<i", extra, i + 5)[0])
        i += 4 + length
    return float(calendar.timegm((*info.date_time, 0, 0, 0)))
