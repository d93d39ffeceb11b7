"""File operations of the commit protocol through Hadoop's FileSystem API (py4j), so the same code
works on local disks, HDFS and object stores. Checksum files (``.crc``) follow their data files."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_COMMIT = re.compile(r"^(\d{20})\.json$")


def hidden(name: str) -> bool:
    """Names Spark's readers skip (``_SUCCESS``, ``_delta_log``, ``.crc``, our staging)."""
    return name.startswith(("_", "."))


class HadoopFs:
    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]

    def _fs(self, path: str) -> tuple[Any, Any]:
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return jpath.getFileSystem(self._conf), jpath

    def size(self, path: str) -> int | None:
        """The file's length, or ``None`` if it does not exist."""
        fs, jpath = self._fs(path)
        try:
            return int(fs.getFileStatus(jpath).getLen())
        except Exception as exc:
            if "FileNotFoundException" in str(exc):
                return None
            raise

    def exists(self, path: str) -> bool:
        fs, jpath = self._fs(path)
        return bool(fs.exists(jpath))

    def files(self, root: str, *, visible_only: bool = False) -> list[tuple[str, int]]:
        """``(path relative to root, size)`` of every file below ``root`` (none if it is missing).
        ``visible_only`` skips names (at any level) that Spark's readers skip."""
        fs, jpath = self._fs(root)
        if not fs.exists(jpath):
            return []
        base = fs.getFileStatus(jpath).getPath().toUri().getPath().rstrip("/") + "/"
        out = []
        found = fs.listFiles(jpath, True)
        while found.hasNext():
            status = found.next()
            path = status.getPath().toUri().getPath()
            relative = path[len(base) :] if path.startswith(base) else path
            if hidden(relative.rsplit("/", 1)[-1]) or (visible_only and any(hidden(p) for p in relative.split("/"))):
                continue
            out.append((relative, int(status.getLen())))
        return sorted(out)

    def rename(self, src: str, dst: str) -> None:
        fs, jsrc = self._fs(src)
        _, jdst = self._fs(dst)
        fs.mkdirs(jdst.getParent())
        if not fs.rename(jsrc, jdst):
            raise OSError(f"could not rename {src} to {dst}")

    def delete(self, path: str, *, recursive: bool = False) -> None:
        fs, jpath = self._fs(path)
        fs.delete(jpath, recursive)

    def delete_if_empty(self, path: str) -> None:
        fs, jpath = self._fs(path)
        if fs.exists(jpath) and fs.getFileStatus(jpath).isDirectory() and not fs.listStatus(jpath):
            fs.delete(jpath, False)

    def delta_version(self, table: str) -> int:
        """The latest committed version of a Delta table from its log listing (-1: no table)."""
        fs, jpath = self._fs(f"{table.rstrip('/')}/_delta_log")
        if not fs.exists(jpath):
            return -1
        versions = [int(m.group(1)) for s in fs.listStatus(jpath) if (m := _COMMIT.match(s.getPath().getName()))]
        return max(versions, default=-1)
