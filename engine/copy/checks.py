"""The checks a copied file passes before it is staged for good: the source did not change while
read, the target directory is writable, the staged bytes have the size and checksum written;
and the attributes (permissions, owner, modification time) a copy is given. No Spark here."""

from __future__ import annotations

import hashlib
import os
import posixpath
import zlib
from typing import Any

from engine.copy.listing import CopyableFile
from engine.copy.options import CopyItem, CopyOptions
from engine.copy.transforms import is_identity

__all__ = [
    "Crc32",
    "check_unchanged",
    "check_writable",
    "hex_digest",
    "new_hasher",
    "set_attributes",
    "set_member_attributes",
    "verify_staged",
]


def check_unchanged(options: CopyOptions, f: CopyableFile, read: int) -> None:
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


def check_writable(options: CopyOptions, item: CopyItem, checked: set[str]) -> None:
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


def new_hasher(algorithm: str) -> Any | None:
    if algorithm == "none":
        return None
    if algorithm == "crc32":
        return Crc32()
    return hashlib.new(algorithm)


def hex_digest(hasher: Any | None) -> str:
    return "" if hasher is None else str(hasher.hexdigest())


class Crc32:
    """zlib's CRC-32 behind hashlib's ``update``/``hexdigest``."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


def verify_staged(options: CopyOptions, f: CopyableFile, path: str, size: int, digest: str) -> None:
    found = os.stat(path).st_size if options.target.local else options.target.fs.get_file_info(path).size
    if found != size:
        raise OSError(f"the staged copy {options.target.display(path)} has {found} bytes, {size} were written")
    if options.checksum == "none":
        return
    hasher = new_hasher(options.checksum)
    assert hasher is not None
    with options.target.fs.open_input_stream(path, compression=None) as staged:
        while chunk := staged.read(options.buffer_size):
            hasher.update(chunk)
    if hex_digest(hasher) != digest:  # of the bytes streamed: the source's own for a plain copy
        what = "the source" if is_identity(list(options.chain)) else "the bytes written"
        raise OSError(f"{options.checksum} of the staged copy differs from {what}'s: {hex_digest(hasher)} != {digest}")


def set_attributes(options: CopyOptions, f: CopyableFile, paths: list[str]) -> None:
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
        if options.preserve_mtime and not options.unpacks:
            os.utime(path, ns=(f.mtime_ns, f.mtime_ns))


def set_member_attributes(options: CopyOptions, path: str, mode: int | None, mtime: float | None) -> None:
    if not options.target.local:
        return
    if options.preserve_permissions and mode is not None and options.permissions is None:
        os.chmod(path, mode & 0o7777)
    if options.preserve_mtime and mtime is not None:
        os.utime(path, (mtime, mtime))
