"""The converter ABC: one step of the chain, compiled to Spark column expressions."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from engine.converters.conf import Action, ConverterConf, RuleConf
from engine.converters.frame import flagged, reject, warn
from engine.errors import ConfigError
from engine.plugins.threshold import Threshold

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from engine.converters.frame import ColumnOf


@dataclass(frozen=True)
class Rule:
    """A step whose flagged records a run counts, and what judges its batch."""

    step: str
    key: str
    action: Action
    max_rejected: Threshold | None

    def flagged(self, col: ColumnOf = F.col) -> Column:
        """Whether the record was flagged by this rule (over the finalized frame, its engine columns
        read with ``col``)."""
        return flagged(self.step, rejected=self.action == "reject", col=col)


_CHECKING: ContextVar[bool] = ContextVar("engine_chain_check", default=False)


@contextmanager
def checking() -> Iterator[None]:
    """Build the chain only to check it (over an empty frame, while a run plans). A step that
    reads something besides the records (a lookup's reference) then builds that read but runs no
    Spark job for it: planning runs outside the run's job scopes, where a stop could not cancel
    the job. The run's first use reads it, inside a work-unit group's scope."""
    token = _CHECKING.set(True)
    try:
        yield
    finally:
        _CHECKING.reset(token)


def is_checking() -> bool:
    """Whether this thread is building the chain only to check it (:func:`checking`)."""
    return _CHECKING.get()


class Converter(ABC):
    """Transforms the record frame (see :mod:`engine.converters.frame`); may reject records.

    ``apply()`` is the template method: a step whose SQL does not parse or names a missing column
    becomes a :class:`ConfigError` naming the step's key, raised while the plan is built, before
    any data is read or written. It first runs :meth:`check` (once per step).
    """

    Conf: ClassVar[type[ConverterConf]]

    def __init__(self, conf: ConverterConf, *, step: str, key: str) -> None:
        self.conf = conf
        self.step = step
        self.key = key
        self._checked = False

    def check(self, spark: SparkSession) -> None:
        """Raise :class:`ConfigError` for a mistake that needs no schema to see and that Spark's
        analysis lets through (a regex that does not compile, a datetime pattern Spark refuses).
        Runs no Spark job; also called when the schema is not known (``mode=validate`` over an
        inferred schema)."""

    def apply(self, frame: DataFrame) -> DataFrame:
        if not self._checked:  # the plan checks; the groups' chains need not again
            self.check(frame.sparkSession)
            self._checked = True
        try:
            return self._apply(frame)
        except AnalysisException as exc:
            raise ConfigError(f"converter `{self.step}`: {first_line(exc)}", key=self.key) from exc

    @abstractmethod
    def _apply(self, frame: DataFrame) -> DataFrame: ...

    def pin(self, spark: SparkSession, version: int | None) -> None:
        """Fix the version of what the step reads besides the records (a lookup's reference): the
        given one (a re-executed plan's), or the latest. A step that reads nothing else: nothing."""

    @property
    def pinned(self) -> int | None:
        """The version :meth:`pin` fixed; ``None`` for a step that reads nothing else."""
        return None

    def release(self) -> None:
        """Free what the step holds for its run (a cached reference); called once the run's
        records are published or given up."""

    def rule(self) -> Rule | None:
        """The rule a run counts for this step: one whose action is not ``reject`` or that has a
        ``max_rejected``; ``None`` for the others (a plain rejection costs the count nothing)."""
        c = self.conf
        if not isinstance(c, RuleConf) or not c.counted:
            return None
        return Rule(self.step, self.key, c.action, c.max_rejected)

    def flag(self, frame: DataFrame, bad: Column, *, reason: Column | str) -> DataFrame:
        """Mark the records where ``bad`` holds as the step's action says: rejected (with
        ``reason``), or warned of (``warn``, ``fail``: they stay valid and are counted)."""
        if isinstance(self.conf, RuleConf) and self.conf.action != "reject":
            return warn(frame, bad, step=self.step)
        return reject(frame, bad, step=self.step, reason=reason)


def first_line(error: object) -> str:
    """Spark's error message without the plan dump and JVM stack that follow it, and without the
    engine's own columns among the columns it suggests (a user never named those)."""
    text = str(getattr(error, "getMessage", lambda: str(error))() or error).strip()
    lines = text.splitlines()
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):  # py4j: the Java error follows
        return _users_columns(lines[1].lstrip(": ").strip() or lines[0])
    return _users_columns(lines[0]) if lines else type(error).__name__


_SUGGESTED = re.compile(r"(Did you mean one of the following\? )\[([^\]]*)\]")


def _users_columns(line: str) -> str:
    """``line`` with the engine's columns (``__engine_...``) left out of Spark's suggestions."""

    def kept(found: re.Match[str]) -> str:
        names = [
            n.strip()
            for n in found.group(2).split(",")
            if n.strip() and not n.strip().strip("`").startswith("__engine_")
        ]
        return f"{found.group(1)}[{', '.join(names)}]" if names else ""

    return _SUGGESTED.sub(kept, line).replace(". .", ".").rstrip()
