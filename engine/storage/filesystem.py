"""The file operations the engine's commit steps need, as one protocol with two implementations:

- :class:`engine.storage.hadoop.HadoopFs`: Hadoop's FileSystem API through py4j, for what Spark
  reads and writes (sinks, sources, the Delta tables): the same code on local disks, HDFS and
  object stores, with the credentials Spark's Hadoop configuration holds.
- :class:`engine.storage.arrow.ArrowFs`: pyarrow's file systems, for copy jobs, which move bytes
  in Python on executors (a pyarrow file system pickles into a task; a py4j one does not).

A commit step takes a :class:`FileSystem` and works on either. Paths are what the implementation
takes (a Hadoop path or URL; a pyarrow path: ``bucket/key`` on object stores). :func:`hidden` is
which names Spark's readers skip, so both sides agree on what a directory holds.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["FileSystem", "hidden"]


def hidden(name: str) -> bool:
    """Whether Spark's file index skips a file or directory of this name when it lists a
    directory: ``.`` or ``_`` prefixes (``_SUCCESS``, ``.crc`` files, ``_delta_log``, the engine's
    staging; not ``_`` names holding a ``=``: partition directories) and files being copied."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


@runtime_checkable
class FileSystem(Protocol):
    """What a commit step does to files: look, move, delete. Each call is one request to the store
    (a listing aside); a rename is atomic on a disk and HDFS, a copy and a delete on object stores."""

    def size(self, path: str) -> int | None:
        """The file's length, ``None`` if nothing is there."""

    def exists(self, path: str) -> bool:
        """Whether a file or directory is at ``path``."""

    def is_file(self, path: str) -> bool:
        """Whether a file (not a directory) is at ``path``."""

    def files(self, root: str, *, visible_only: bool = False) -> list[tuple[str, int]]:
        """``(path relative to root, size)`` of every file below ``root`` whose name is not
        :func:`hidden`, sorted (none if ``root`` is missing). ``visible_only``: nor any directory
        on the way."""

    def rename(self, src: str, dst: str) -> None:
        """Move a file to ``dst``, creating its parent directories, replacing what is there."""

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file, or a directory and all below it (``recursive``); nothing if it is gone."""

    def delete_if_empty(self, path: str) -> None:
        """Delete the directory at ``path`` if nothing is in it."""
