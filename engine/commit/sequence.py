"""A commit sequence: one batch's steps, stored in the commit log before any runs
(:meth:`~engine.commit.log.CommitLog.sequence` builds its row), then run in order. A step already
done (``verify()``) is skipped when a sequence is replayed."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from engine.commit.errors import StepFailed
from engine.commit.killpoints import kill_point
from engine.commit.log import Batch
from engine.commit.steps import CommitStep, SetWatermarks, StepContext

log = logging.getLogger(__name__)


@dataclass
class CommitSequence:
    job: str
    dag: str
    scope: str
    batch: int
    steps: list[CommitStep]
    datasets: list[str]

    @classmethod
    def of(cls, job: str, batch: Batch) -> CommitSequence:
        steps = [CommitStep.from_json(s) for s in batch.steps()]
        return cls(job, batch.dag, batch.scope, batch.number, steps, batch.datasets())

    def run(self, ctx: StepContext) -> None:
        """Run every step not yet done, in order; raise on the first that fails."""
        for i, step in enumerate(self.steps, 1):
            if isinstance(step, SetWatermarks):
                kill_point("before_state_saved", self.dag)
            ctx.midway = functools.partial(kill_point, f"mid_step:{i}", self.dag)
            if not ctx.fresh and step.verify(ctx):
                log.info("%s batch %d: step %d already done: %s", self.dag, self.batch, i, step.describe())
            else:
                log.info("%s batch %d: step %d: %s", self.dag, self.batch, i, step.describe())
                try:
                    step.execute(ctx)
                except Exception as exc:
                    raise StepFailed(i, step, exc) from exc
            kill_point(f"after_step:{i}", self.dag)
        kill_point("before_done", self.dag)
