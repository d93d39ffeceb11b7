"""``mode=commit``: show the batches waiting to be published, release a quarantined one (the next
run tries it again) or abandon one (its remaining steps never run). What each action does to the
commit log is :mod:`engine.commit.operations`'; this parses the request and prints."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.cli.status import table
from engine.commit import operations
from engine.commit.log import CommitLog
from engine.errors import ConfigError
from engine.state.status import Status
from engine.state.store import CommitLogStore, MetadataStore


class CommitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = "show"
    dag: str | None = None
    batch: int | None = None
    reason: str | None = None


def show_pending(store: CommitLogStore, job: str, max_attempts: dict[str, int]) -> list[dict[str, Any]]:
    found = CommitLog(store, job, run_id="").pending(max_attempts)
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
    write: bool = True,
) -> dict[str, Any]:
    """Show, release or abandon a waiting batch; with ``write`` false, only refuse a mistake,
    writing nothing (an empty answer otherwise)."""
    if req.action == "show":
        return {"job": job, "status": Status.OK, "batches": show_pending(store, job, max_attempts)}
    if req.action not in operations.ACTIONS:
        raise ConfigError(f"unknown action `{req.action}`; use show, release or abandon", key="commit.action")
    if not req.reason:
        raise ConfigError(f"`{req.action}` needs a reason (it is recorded)", key="commit.reason")
    log = CommitLog(store, job, run_id)
    target = operations.target(log, max_attempts, dag=req.dag, batch=req.batch)
    if not write:
        return {}
    if req.action == "release":
        operations.release(log, target, req.reason)
        print(f"released batch {target.batch} of dag {target.dag}: the next run tries to publish it again")
    else:
        operations.abandon(log, target, req.reason, spark=spark, state=store)
        print(
            f"abandoned batch {target.batch} of dag {target.dag}: its remaining steps will not run and its staged "
            "data is deleted; steps already done stay done, and its datasets keep their stored watermarks"
        )
    return {"job": job, "status": Status.CHANGED, "action": req.action, "dag": target.dag, "batch": target.batch}
