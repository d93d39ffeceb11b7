"""Copy jobs: dataset finders, copy listing, byte transforms, file-set publisher.

This module holds what the byte transforms (:mod:`engine.copy.transforms`) and the age format
(:mod:`engine.copy.age_encryption`) share: their error (:mod:`engine.copy.errors`) and the pull-based stream
over byte chunks they are built from. A transform is a generator from chunks to chunks; nothing is
computed before it is read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

from typing_extensions import Buffer

from engine.copy.errors import TransformError

__all__ = ["ChunkStream", "TransformError", "chunk_stream", "read_chunks"]


class ChunkStream(io.RawIOBase):
    """A readable raw stream over an iterator of byte chunks, pulling the next chunk only when read."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] | None = chunks
        self._chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer, /) -> int:
        if not self._fill():
            return 0
        target = memoryview(buffer).cast("B")
        n = min(len(target), len(self._chunk))
        target[:n] = self._chunk[:n]
        self._chunk = self._chunk[n:]
        return n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        if not self._fill():
            return b""
        taken, self._chunk = self._chunk[:size], self._chunk[size:]
        return taken.tobytes()

    def readall(self) -> bytes:
        parts = [self._chunk.tobytes()]
        self._chunk = memoryview(b"")
        while self._fill():
            parts.append(self._chunk.tobytes())
            self._chunk = memoryview(b"")
        return b"".join(parts)

    def close(self) -> None:
        """Close the stream and the generator behind it (its ``finally`` blocks run now)."""
        chunks, self._chunks = self._chunks, None
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
        super().close()

    def _fill(self) -> bool:
        """Make ``_chunk`` non-empty; False at the end."""
        while not self._chunk:
            if self._chunks is None:
                return False
            chunk = next(self._chunks, None)
            if chunk is None:
                self._chunks = None
                return False
            self._chunk = memoryview(chunk)
        return True


def read_chunks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """The bytes of ``stream`` as chunks of at most ``size`` bytes (never empty ones)."""
    while chunk := stream.read(size):
        yield chunk


def chunk_stream(chunks: Iterator[bytes], buffer_size: int) -> BinaryIO:
    """A buffered readable stream (``read(n)``, ``readinto``) over ``chunks``."""
    return io.BufferedReader(ChunkStream(chunks), buffer_size)
