"""Telling lost state from a first run: a DAG whose state table holds no watermark of it, although
other metadata shows that it committed some.

Without this check a deleted ``_engine/state`` makes the next run read every dataset again from
its beginning and publish it a second time. The evidence, read only when the state is empty (a
first run, or lost state; the normal path pays nothing):

- the commit log: a finished batch of the DAG whose commit sequence set watermarks;
- the file log: files read by batches the commit log does not know (a batch it knows either set
  watermarks, which the commit log shows, or is unfinished or abandoned: its files may be logged
  while its watermarks are not set, and recovery or the next run deals with it);
- the job status: a recent run that ended with a dataset at a watermark.

Acknowledging it on purpose (``mode=checkpoint checkpoint.action=start_over``) writes a ``reset``
row for every dataset the evidence names, so the DAG has state again: none, on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.commit.log import DONE, DagLog
from engine.commit.steps import SetWatermarks
from engine.state.store import LIVE, DatasetState, LogRow, MetadataStore

RECENT_RUNS = 20
"""How many of the job's last runs the job status evidence looks at."""


@dataclass(frozen=True)
class LostState:
    """One scope of a DAG whose state is gone."""

    dag: str
    scope: str
    datasets: list[str]
    """Every dataset the evidence shows had a watermark."""
    evidence: list[str]
    """What showed it, as phrases ("the commit log ... shows ...")."""


def lost_state(
    store: MetadataStore,
    log: list[LogRow],
    *,
    job: str,
    dag: str,
    scope: str,
    state: dict[str, DatasetState] | None = None,
) -> LostState | None:
    """``None`` unless ``(job, dag, scope)`` has no state (``state``, if already loaded) but the
    commit log rows ``log``, the file log or the job status show it had some."""
    if state if state is not None else store.load_state(job, dag, scope):
        return None
    evidence: list[str] = []
    datasets: set[str] = set()
    dag_log = DagLog(dag, log)
    batches = committed_watermarks(dag_log, scope)
    if batches:
        datasets.update(d for found in batches.values() for d in found)
        evidence.append(
            f"the commit log {store.location('commit_log')} shows {len(batches)} published batch(es) that set "
            f"watermarks (the last: batch {max(batches)})"
        )
    known = {b.number for b in dag_log.batches if b.scope == scope}
    unknown = {b: n for b, n in store.file_batches(job, dag, scope).items() if b not in known}
    if unknown:
        datasets.update(store.files_read(job, dag, scope))
        evidence.append(
            f"the file log {store.location('files_read')} lists {sum(unknown.values())} file(s) read by "
            f"{len(unknown)} batch(es) the commit log does not know"
        )
    runs = [r for r in store.job_status(job, runs=RECENT_RUNS) if (r.dag, r.scope) == (dag, scope) and r.high]
    if runs:
        datasets.update(r.dataset for r in runs)
        last = runs[0]
        evidence.append(
            f"the job status {store.location('job_status')} shows run {last.run_id} left dataset "
            f"{last.dataset} at watermark {last.high}"
        )
    return LostState(dag, scope, sorted(datasets), evidence) if evidence else None


def lost_scopes(store: MetadataStore, job: str, dag: str) -> list[LostState]:
    """Every scope of ``dag`` (live, and each backfill the metadata knows) whose state is lost."""
    log = store.read_log(job)
    recent = store.job_status(job, runs=RECENT_RUNS)
    scopes = {LIVE} | {r.scope for r in log if r.dag == dag} | {r.scope for r in recent if r.dag == dag}
    found = (lost_state(store, log, job=job, dag=dag, scope=s) for s in sorted(scopes))
    return [lost for lost in found if lost is not None]


def committed_watermarks(log: DagLog, scope: str) -> dict[int, list[str]]:
    """The finished batches of ``scope`` whose commit sequence set watermarks: their numbers and
    those datasets."""
    out: dict[int, list[str]] = {}
    for batch in log.batches:
        if batch.scope != scope or batch.sequence is None or not any(r.kind == DONE for r in batch.rows):
            continue
        marks = [d for step in batch.steps() if step.get("kind") == SetWatermarks.kind for d in step["watermarks"]]
        if marks:
            out[batch.number] = sorted(marks)
    return out
