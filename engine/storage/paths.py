"""A path or URL read once: is it local, where does it lie, is it the same place as another.

Paths reach the engine in three forms: plain paths (``orders``, ``/data/in``), the Hadoop form of a
local one (``file:/data/in``, or ``file:///data/in``) and object store URLs (``s3a://bucket/key``).
:class:`StoragePath` reads all three by one rule, so the storage clients, the plugin configs and the
compiler's overlap checks agree on each: a ``file:`` URL is local, and the same place as the plain
path it names. Pure Python: the compiler uses it without a JVM.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Place", "StoragePath", "is_relative", "resolving_once", "under"]

Place = tuple[str, str, str]
"""``(scheme, authority, normalised path)``: equal for one place however it is written."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}
"""Hadoop's names for the S3 connector, all reaching the same buckets."""


def _rooted(path: str) -> str:
    """``path`` from the root with ``.``, ``..``, doubled and trailing slashes folded; a leading
    ``//`` too, which ``posixpath.normpath`` keeps (POSIX lets it mean something, Linux does not)."""
    return "/" + posixpath.normpath("/" + path).lstrip("/")


def _appended(text: str, names: tuple[str, ...]) -> str:
    return "/".join((text.rstrip("/"), *names))


_RESOLVED: ContextVar[dict[str, str] | None] = ContextVar("resolved", default=None)


@contextmanager
def resolving_once(memo: dict[str, str]) -> Iterator[None]:
    """Within the block, a local path resolved once (its symbolic links read) is taken from
    ``memo`` afterwards: for a caller that compiles many jobs over the same paths and keeps what
    it compiled anyway (the flow compiler)."""
    token = _RESOLVED.set(memo)
    try:
        yield
    finally:
        _RESOLVED.reset(token)


def _absolute(path: str, base: str | Path | None, resolve: bool) -> str:
    if resolve:  # Path.resolve's rule (symbolic links followed, missing parts kept), without pathlib's cost
        joined = os.path.join(os.fspath(base) if base else os.getcwd(), path)
        memo = _RESOLVED.get()
        if memo is None:
            return os.path.realpath(joined)
        found = memo.get(joined)
        if found is None:
            found = memo[joined] = os.path.realpath(joined)
        return found
    return os.path.abspath(os.path.join(base or "", path))


def is_relative(text: str) -> bool:
    """Whether ``text`` is a plain relative path: neither rooted nor written with a scheme."""
    return not text.startswith("/") and _SCHEME.match(text) is None


def under(text: str, root: str) -> str:
    """``text`` appended to ``root`` (the warehouse) if it is a relative path, else as it is. Both
    as written: the result names tables and state, so it is not normalised."""
    return _appended(root, (text,)) if is_relative(text) else text


@dataclass(frozen=True)
class StoragePath:
    """A path on the local file system or an object store, with the text it is written back as.

    Two values are equal when they name the same scheme, authority and path; :attr:`place` is the
    looser key of overlap checks (``s3a`` is ``s3``, ``user@`` ignored)."""

    scheme: str
    """Lower case; ``file`` for the local file system, however it was written."""
    authority: str
    """The bucket or host as written (``user@`` and port kept); empty for a local path."""
    path: str
    """Rooted and normalised (see :func:`_rooted`): for a local path, the absolute path."""
    text: str = field(compare=False)
    """How callers write it back: a URL (``file:`` ones too) as given, a plain path absolute."""

    @classmethod
    def parse(cls, text: str, *, base: str | Path | None = None, resolve: bool = False) -> StoragePath:
        """Read ``text``. A plain path, and a ``file:`` one without a root, is made absolute against
        ``base`` (the working directory by default) by ``os.path.abspath``, or with ``resolve`` by
        ``Path.resolve`` (symbolic links followed; a plain absolute path resolved too)."""
        if not resolve and _absolute_text(text):
            return _parsed(text)  # neither the file system nor the base is asked: the same each time
        return cls._read(text, base, resolve)

    @classmethod
    def _read(cls, text: str, base: str | Path | None, resolve: bool) -> StoragePath:
        found = _SCHEME.match(text)
        if found is None:
            local = _absolute(text, base, resolve)
            return cls("file", "", _rooted(local), local)
        scheme, rest = found.group(1).lower(), text[found.end() :]
        if scheme == "file":  # file:/x, file:///x, and file://x read as /x (as the storage clients always have)
            return cls("file", "", _rooted(rest if rest.startswith("/") else _absolute(rest, base, resolve)), text)
        authority, inner = "", rest
        if rest.startswith("//"):
            authority, _, inner = rest[2:].partition("/")
        return cls(scheme, authority, _rooted(inner), text)

    def __str__(self) -> str:
        return self.text

    @property
    def is_local(self) -> bool:
        """Whether it lies on the local file system."""
        return self.scheme == "file"

    @property
    def local(self) -> str | None:
        """The absolute local path, or None on an object store."""
        return self.path if self.is_local else None

    @property
    def is_url(self) -> bool:
        """Whether it was written with a scheme (``file:`` too) rather than as a plain path."""
        return _SCHEME.match(self.text) is not None

    @property
    def place(self) -> Place:
        """The key overlap checks compare: one per place, for every way of writing it."""
        scheme = _SAME_STORE.get(self.scheme, self.scheme)
        return (scheme, self.authority.rsplit("@", 1)[-1], self.path)

    def join(self, *names: str) -> StoragePath:
        """This path with ``names`` appended to its text as written (see :func:`under`)."""
        text = _appended(self.text, names)
        return StoragePath(self.scheme, self.authority, _rooted("/".join((self.path, *names))), text)


def _absolute_text(text: str) -> bool:
    """Whether ``text`` names one place whatever the base: rooted, or a URL other than a relative
    ``file:`` one."""
    if text.startswith("/"):
        return True
    found = _SCHEME.match(text)
    return found is not None and (found.group(1).lower() != "file" or text.startswith("/", found.end()))


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> StoragePath:
    """An absolute path or a URL, read once (compiling a job compares the same places many times)."""
    return StoragePath._read(text, None, False)
