"""The errors of the publish protocol. A failed step leaves its batch's sequence unfinished in the
commit log: the next run replays it (``verify`` first) until ``publish.max_attempts`` quarantines
the DAG, so none of them is retried on the spot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.causes import telling_line
from engine.errors import EngineError

if TYPE_CHECKING:
    from engine.commit.steps import CommitStep

__all__ = ["StepError", "StepFailed"]


class StepError(EngineError):
    """A commit step cannot be done (a staged file is missing, a write was refused)."""


class StepFailed(EngineError):
    """Step ``index`` (1-based) of a commit sequence failed; the message names the step and the
    first line of its cause (chained as ``__cause__``)."""

    def __init__(self, index: int, step: CommitStep, cause: BaseException) -> None:
        super().__init__(f"step {index} ({step.describe()}) failed: {telling_line(cause)}")
        self.index = index
