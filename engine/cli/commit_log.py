"""``mode=commit``: show the batches waiting to be published, release a quarantined one (the next
run tries it again) or abandon one (its remaining steps never run)."""

from __future__ import annotations

import getpass
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.cli.status import table
from engine.commit.log import ABANDONED, RELEASED, pending
from engine.errors import ConfigError
from engine.state.store import LogRow, MetadataStore, utcnow


class CommitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = "show"
    dag: str | None = None
    batch: int | None = None
    reason: str | None = None


def show_pending(store: MetadataStore, job: str, max_attempts: dict[str, int]) -> list[dict[str, Any]]:
    found = pending(store.read_log(job), max_attempts)
    table(
        "batches waiting to be published",
        ["dag", "scope", "batch", "state", "attempts", "written_by", "datasets", "last_error"],
        [[p.dag, p.scope, p.batch, p.state, p.attempts, p.written_by, p.datasets, p.last_error[:100]] for p in found],
    )
    return [asdict(p) for p in found]


def commit_command(
    store: MetadataStore,
    job: str,
    max_attempts: dict[str, int],
    req: CommitRequest,
    *,
    run_id: str,
    spark: Any = None,
) -> dict[str, Any]:
    if req.action == "show":
        return {"job": job, "status": "OK", "batches": show_pending(store, job, max_attempts)}
    if req.action not in ("release", "abandon"):
        raise ConfigError(f"unknown action `{req.action}`; use show, release or abandon", key="commit.action")
    if not req.reason:
        raise ConfigError(f"`{req.action}` needs a reason (it is recorded)", key="commit.reason")
    found = [p for p in pending(store.read_log(job), max_attempts) if req.dag in (None, p.dag)]
    if req.batch is not None:
        found = [p for p in found if p.batch == req.batch]
    if not found:
        raise ConfigError(
            f"no unfinished batch of job {job}{f' dag {req.dag}' if req.dag else ''}"
            f"{f' numbered {req.batch}' if req.batch is not None else ''}; see mode=commit",
            key="commit.batch" if req.batch is not None else "commit.dag",
        )
    if len(found) > 1:
        raise ConfigError(
            f"{len(found)} unfinished batches match ({', '.join(f'{p.dag}#{p.batch}' for p in found)}): name one "
            "with commit.dag and commit.batch",
            key="commit.dag",
        )
    target = found[0]
    kind = RELEASED if req.action == "release" else ABANDONED
    who = getpass.getuser()
    store.append_log(
        [LogRow(job, target.dag, target.scope, target.batch, kind, run_id, utcnow(), "", f"{who}: {req.reason}")]
    )
    if kind == RELEASED:
        print(f"released batch {target.batch} of dag {target.dag}: the next run tries to publish it again")
    else:
        if spark is not None:
            _delete_staging(spark, store, job, target.dag, target.batch)
        print(
            f"abandoned batch {target.batch} of dag {target.dag}: its remaining steps will not run and its staged "
            "data is deleted; steps already done stay done, and its datasets keep their stored watermarks"
        )
    return {"job": job, "status": "CHANGED", "action": req.action, "dag": target.dag, "batch": target.batch}


def _delete_staging(spark: Any, store: MetadataStore, job: str, dag: str, number: int) -> None:
    """Run the abandoned sequence's staging clean-up (its data will never be published)."""
    from engine.commit.fs import HadoopFs
    from engine.commit.log import DagLog
    from engine.commit.steps import CommitStep, DeleteStaging, StepContext

    batch = DagLog(dag, store.read_log(job)).find(number)
    if batch is None or batch.sequence is None:
        return
    ctx = StepContext(spark, store, HadoopFs(spark), fresh=False)
    for step in (CommitStep.from_json(s) for s in batch.steps()):
        if isinstance(step, DeleteStaging):
            step.execute(ctx)
