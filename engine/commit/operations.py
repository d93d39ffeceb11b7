"""What an operator does to the commit log (``mode=commit``): find the unfinished batch meant,
release it (its failed attempts no longer count: the next run tries it again) or abandon it (its
remaining steps never run and its staged data is deleted). The CLI only parses and prints."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from engine.commit.log import CommitLog, Pending
from engine.commit.steps import CommitStep, DeleteStaging, DeltaWrite, StepContext
from engine.errors import ConfigError
from engine.state.store import StateStore
from engine.storage.hadoop import HadoopFs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ACTIONS = ("release", "abandon")


def target(log: CommitLog, max_attempts: dict[str, int], *, dag: str | None, batch: int | None) -> Pending:
    """The one unfinished batch that ``dag`` and ``batch`` (either may be left out) name."""
    found = [p for p in log.pending(max_attempts) if dag in (None, p.dag)]
    if batch is not None:
        found = [p for p in found if p.batch == batch]
    if not found:
        raise ConfigError(
            f"no unfinished batch of job {log.job}{f' dag {dag}' if dag else ''}"
            f"{f' numbered {batch}' if batch is not None else ''}; see mode=commit",
            key="commit.batch" if batch is not None else "commit.dag",
        )
    if len(found) > 1:
        raise ConfigError(
            f"{len(found)} unfinished batches match ({', '.join(f'{p.dag}#{p.batch}' for p in found)}): name one "
            "with commit.dag and commit.batch",
            key="commit.dag",
        )
    return found[0]


def release(log: CommitLog, pending: Pending, reason: str) -> None:
    log.write(log.released(pending.dag, pending.scope, pending.batch, f"{getpass.getuser()}: {reason}"))


def abandon(
    log: CommitLog, pending: Pending, reason: str, *, spark: SparkSession | None = None, state: StateStore
) -> None:
    """Drop the batch; with ``spark``, also run its sequence's staging clean-up (its data will
    never be published)."""
    log.write(log.abandoned(pending.dag, pending.scope, pending.batch, f"{getpass.getuser()}: {reason}"))
    if spark is not None:
        _delete_staging(spark, state, log, pending)


def _delete_staging(spark: SparkSession, state: StateStore, log: CommitLog, pending: Pending) -> None:
    batch = log.dag(pending.dag).find(pending.batch)
    if batch is None or batch.sequence is None:
        return
    ctx = StepContext(spark, state, HadoopFs(spark), fresh=False)
    # Only the staging deletions run: decoding the other steps would need every plugin that
    # defines step kinds (a copy DAG's) imported, and none of them is executed here.
    for raw in batch.steps():
        if raw.get("kind") == DeleteStaging.kind:
            CommitStep.from_json(raw).execute(ctx)
        elif raw.get("kind") == DeltaWrite.kind and raw.get("written"):
            step = CommitStep.from_json(raw)
            assert isinstance(step, DeltaWrite)
            step.discard(ctx)
