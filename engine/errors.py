"""The root of every error the engine raises on purpose, and the exit code each maps to.

Each package that raises its own errors keeps them in its ``errors.py`` (:mod:`engine.commit.errors`,
:mod:`engine.copy.errors`, :mod:`engine.plugins.errors`, :mod:`engine.state.errors`), every one
under :class:`EngineError`.
``transient`` says whether doing the same again may succeed: only transient errors are retried
(:func:`engine.state.conflicts.is_transient` classifies the foreign ones, Delta's commit conflicts).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_CONFIG = 2
EXIT_BUSY = 3
EXIT_SIGNALLED = 128
"""A run stopped by a signal exits ``128 + signal number`` (130 for SIGINT, 143 for SIGTERM)."""


class EngineError(Exception):
    """Root of the engine's errors. ``exit_code`` is what the CLI exits with; ``transient`` whether
    the action that raised it may be retried as it is (never, unless a subclass says so)."""

    exit_code = EXIT_JOB_FAILED
    transient = False


class TransientError(EngineError):
    """An error that doing the same again may not meet (another writer's concurrent commit): the
    action that raised it wrote nothing and is retried."""

    transient = True


class ConfigError(EngineError):
    """A mistake in configuration or input the user must fix; nothing has been written.

    ``key`` is the dotted key path (``job.sinks.lake.from``) and ``file`` the config file it came
    from, when known.
    """

    exit_code = EXIT_CONFIG

    def __init__(self, message: str, *, key: str | None = None, file: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.file = file

    def __str__(self) -> str:
        where = [f"key `{self.key}`" if self.key else "", f"file {self.file}" if self.file else ""]
        shown = ", ".join(p for p in where if p)
        return f"{self.message} ({shown})" if shown else self.message

    def in_file(self, file: str | None) -> ConfigError:
        """This error, naming ``file`` if it names none yet."""
        if self.file is None:
            self.file = file
        return self

    def at(self, key: str | None) -> ConfigError:
        """This error, naming ``key`` if it names none yet."""
        if self.key is None:
            self.key = key
        return self


class JobFailedError(EngineError):
    """A job ran and failed (a Spark error, an I/O error); other DAGs may have succeeded."""


class UnreachableError(JobFailedError):
    """A system the job reads or writes (a database, a broker) cannot be reached, or refuses the
    login: nothing was read from it or written to it.

    Exit code 1, as a failed job, not 2: the config may well be right (a database down, a network
    cut, a password rotated on the server), and the same run may succeed later, so a scheduler may
    retry it. It is not retried within the run (``transient`` is false): waiting is the
    deployment's to decide. ``key`` is the config node that names the system (``job.sources.db``),
    ``connection`` the named connection it took its address from, when it took one; ``note`` what
    the mode that met it adds (``mode=validate``: what its exit code then means).
    """

    def __init__(self, message: str, *, key: str, connection: str | None = None, note: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.connection = connection
        self.note = note

    def __str__(self) -> str:
        via = f", connection `{self.connection}`" if self.connection else ""
        return f"{self.message} (key `{self.key}`{via})" + (f". {self.note}" if self.note else "")

    def through(self, connections: dict[str, str]) -> UnreachableError:
        """This error, naming the connection its node took (``connections``: node key -> name)."""
        if self.connection is None:
            self.connection = connections.get(self.key)
        return self


class JobBusyError(EngineError):
    """Another run of the same job holds its lease; nothing was done."""

    exit_code = EXIT_BUSY


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (a likely typo of it), if one is close enough."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean `<closest>`? "`` for the known name closest to ``name``, or ``""``: the start
    of the hint of an "unknown ..." error."""
    close = closest(name, known)
    return f"did you mean `{close}`? " if close else ""
