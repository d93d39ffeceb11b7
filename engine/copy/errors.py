"""The errors of copy jobs. Each fails the file set or dataset it names, never the run: the next run
lists and copies again. None is transient (the same bytes, listing or URL fail again)."""

from __future__ import annotations

from engine.errors import ConfigError, EngineError

__all__ = ["FileSystemConfigError", "ListingError", "TransformError"]


class TransformError(EngineError):
    """A stream could not be transformed (corrupt gzip or archive, wrong key, unsafe member path).

    Its message says what; the caller adds the file. Never transient: the same bytes fail again.
    """


class ListingError(EngineError):
    """A dataset cannot be listed or diffed safely (its message says why); that dataset fails."""


class FileSystemConfigError(ConfigError, ValueError):
    """A URL or option that names no usable file system. ``url`` (secrets masked) and ``option`` say where."""

    def __init__(self, message: str, *, url: str, option: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.option = option
