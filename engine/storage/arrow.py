"""pyarrow's file systems as a :class:`~engine.storage.filesystem.FileSystem`: what copy jobs'
commit steps do to their targets. A local disk is worked on through ``os`` (a rename is atomic and
``rmdir`` refuses a directory that is not empty, which pyarrow's local file system does not
promise); object stores through pyarrow (a rename is a copy and a delete: one request per file,
atomic per file only)."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil

import pyarrow.fs as pafs

from engine.storage.filesystem import hidden

__all__ = ["ArrowFs"]


class ArrowFs:
    """The :class:`~engine.storage.filesystem.FileSystem` of a pyarrow file system; ``local``: its
    paths are the local disk's (``/a/b``), else the store's (``bucket/key``)."""

    def __init__(self, fs: pafs.FileSystem, *, local: bool) -> None:
        self.fs = fs
        self.local = local

    def _kind(self, path: str) -> pafs.FileType:
        return self.fs.get_file_info(path).type

    def size(self, path: str) -> int | None:
        if self.local:
            try:
                return os.stat(path).st_size
            except FileNotFoundError:
                return None
        info = self.fs.get_file_info(path)
        return None if info.type == pafs.FileType.NotFound else int(info.size or 0)

    def exists(self, path: str) -> bool:
        if self.local:
            return os.path.lexists(path)
        return bool(self._kind(path) != pafs.FileType.NotFound)

    def is_file(self, path: str) -> bool:
        """A file (or a link, locally) at ``path``; not a directory."""
        if self.local:
            return os.path.islink(path) or os.path.isfile(path)
        return bool(self._kind(path) == pafs.FileType.File)

    def empty_dir(self, path: str) -> bool:
        """A directory (or an object store's directory marker) with nothing in it."""
        if self.local:
            return os.path.isdir(path) and not os.listdir(path)
        if self._kind(path) != pafs.FileType.Directory:
            return False
        return not self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))

    def files(self, root: str, *, visible_only: bool = False) -> list[tuple[str, int]]:
        base = root.rstrip("/") + "/"
        out = []
        for info in self.fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File or not info.path.startswith(base):
                continue
            relative = info.path[len(base) :]
            if hidden(posixpath.basename(relative)) or (visible_only and any(hidden(p) for p in relative.split("/"))):
                continue
            out.append((relative, int(info.size or 0)))
        return sorted(out)

    def rename(self, src: str, dst: str) -> None:
        if self.local:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
        else:
            self.fs.move(src, dst)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        if self.local:
            if recursive:
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            return
        if not recursive:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)
        elif self._kind(path) == pafs.FileType.Directory:
            self.fs.delete_dir(path)
        else:
            self.delete(path)

    def delete_if_empty(self, path: str) -> None:
        """Locally ``rmdir``, which refuses a directory another writer has just put a file in; an
        object store has no such check (its directory is a marker object): it is listed first."""
        if self.local:
            with contextlib.suppress(OSError):  # not empty, or already gone
                os.rmdir(path)
        elif self.empty_dir(path):
            self.fs.delete_dir(path)
