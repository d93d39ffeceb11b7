"""Hadoop's FileSystem API through py4j: the :class:`~engine.storage.filesystem.FileSystem` of what
Spark reads and writes, so commit steps, sinks and sources see paths exactly as Spark's readers and
writers do (local disks, HDFS, object stores through S3A, with Spark's credentials). Checksum files
(``.crc``) follow their data files. Each method is one or two py4j calls; listing many files for a
source goes through Spark itself (:mod:`engine.sources.file_listing`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from engine.platform.jvm import java_class
from engine.storage.filesystem import hidden

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HadoopFs"]

_COMMIT = re.compile(r"^(\d{20})\.json$")


class HadoopFs:
    """The :class:`~engine.storage.filesystem.FileSystem` of a Spark session's Hadoop configuration,
    with what only Hadoop paths need beside it: globs and a Delta table's latest version."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]

    def _fs(self, path: str) -> tuple[Any, Any]:
        jpath = self._class("org.apache.hadoop.fs.Path")(path)
        return jpath.getFileSystem(self._conf), jpath

    def _class(self, name: str) -> Any:
        return java_class(self._jvm, name)

    def size(self, path: str) -> int | None:
        fs, jpath = self._fs(path)
        if not fs.exists(jpath):  # asked first: a missing file's exception costs far more through py4j
            return None
        try:
            return int(fs.getFileStatus(jpath).getLen())
        except Exception as exc:
            if "FileNotFoundException" in str(exc):  # deleted in between
                return None
            raise

    def head(self, path: str, max_bytes: int) -> bytes:
        """At most the first ``max_bytes`` of a file, decompressed when its name says a codec
        Hadoop knows (``.gz``, ``.bz2``, ...): a look at a file from the driver, no Spark job."""
        fs, jpath = self._fs(path)
        stream = fs.open(jpath)
        try:
            codec = self._class("org.apache.hadoop.io.compress.CompressionCodecFactory")(self._conf).getCodec(jpath)
            source = codec.createInputStream(stream) if codec is not None else stream
            bounded = self._class("org.apache.commons.io.input.BoundedInputStream")(source, max_bytes)
            return bytes(self._class("org.apache.commons.io.IOUtils").toByteArray(bounded))
        finally:
            stream.close()

    def read_at(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of a file from ``offset`` (fewer at its end), as stored (no codec)."""
        fs, jpath = self._fs(path)
        stream = fs.open(jpath)
        try:
            stream.seek(offset)
            bounded = self._class("org.apache.commons.io.input.BoundedInputStream")(stream, length)
            return bytes(self._class("org.apache.commons.io.IOUtils").toByteArray(bounded))
        finally:
            stream.close()

    def copy_range(self, src: str, dst: str, offset: int, length: int, *, prefix: bytes = b"") -> None:
        """Write ``prefix`` then ``length`` bytes of ``src`` from ``offset`` as the file ``dst``
        (replacing one there), streamed from file system to file system inside the JVM."""
        fs, jsrc = self._fs(src)
        dst_fs, jdst = self._fs(dst)
        stream = fs.open(jsrc)
        try:
            stream.seek(offset)
            out = dst_fs.create(jdst, True)
            try:
                if prefix:
                    out.write(bytearray(prefix))
                self._class("org.apache.commons.io.IOUtils").copyLarge(stream, out, 0, length)
            finally:
                out.close()
        finally:
            stream.close()

    def input_file_name(self, path: str) -> str:
        """What Spark's ``input_file_name()`` says of a record of the file at ``path`` (a
        qualified path): its URL-encoded form, a local file's as ``file:///...``."""
        encoded = str(
            self._class("org.apache.spark.paths.SparkPath")
            .fromPath(self._class("org.apache.hadoop.fs.Path")(path))
            .urlEncoded()
        )
        return (
            f"file://{encoded[len('file:') :]}"
            if encoded.startswith("file:/") and not encoded.startswith("file://")
            else encoded
        )

    def exists(self, path: str) -> bool:
        fs, jpath = self._fs(path)
        return bool(fs.exists(jpath))

    def is_file(self, path: str) -> bool:
        fs, jpath = self._fs(path)
        return bool(fs.isFile(jpath))

    def files(self, root: str, *, visible_only: bool = False) -> list[tuple[str, int]]:
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

    def touch(self, path: str) -> None:
        """Create an empty file at ``path`` (replacing one there)."""
        fs, jpath = self._fs(path)
        fs.create(jpath, True).close()

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` as the file at ``path`` (replacing one there)."""
        fs, jpath = self._fs(path)
        out = fs.create(jpath, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

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

    def matches(self, pattern: str) -> bool:
        """Whether anything matches the glob (one call, whatever the number of matches)."""
        fs, jpath = self._fs(pattern)
        found = fs.globStatus(jpath)
        return found is not None and len(found) > 0

    def glob(self, pattern: str, *, visible_only: bool = True) -> list[tuple[str, bool]]:
        """``(uri, is_directory)`` of each match of the glob, as Spark expands it (each visible
        one: :func:`~engine.storage.filesystem.hidden`)."""
        fs, jpath = self._fs(pattern)
        matches = fs.globStatus(jpath)
        if matches is None:
            return []
        out = []
        for status in matches:
            path = status.getPath()
            if not (visible_only and hidden(path.getName())):
                out.append((path.toString(), bool(status.isDirectory())))
        return out

    def delta_version(self, table: str) -> int:
        """The latest committed version of a Delta table from its log listing (-1: no table): one
        listing, cheaper than loading the log, which the hot path does not need."""
        fs, jpath = self._fs(f"{table.rstrip('/')}/_delta_log")
        if not fs.exists(jpath):
            return -1
        versions = [int(m.group(1)) for s in fs.listStatus(jpath) if (m := _COMMIT.match(s.getPath().getName()))]
        return max(versions, default=-1)
