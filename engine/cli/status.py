"""``mode=status`` and ``mode=checkpoint``: the job's last runs, every dataset's watermark and
the checkpoint changes, as readable tables on stdout (the summary JSON stays the last line). What
is read is :class:`~engine.state.report.StatusReport`'s and what a change does
:mod:`engine.state.checkpoints`'; this prints."""

from __future__ import annotations

import json
import logging
from typing import Any

from engine.cli import rewind_effects
from engine.errors import ConfigError
from engine.runtime.lost_state import lost_scopes
from engine.state import watermarks
from engine.state.checkpoints import CheckpointRequest, change_checkpoint, dag_of, rereads, start_over
from engine.state.errors import START_OVER
from engine.state.report import StatusReport
from engine.state.status import Status
from engine.state.store import CheckpointChange, MetadataStore

log = logging.getLogger(__name__)


def status_report(
    store: MetadataStore, job: str, *, runs: int = 5, max_attempts: dict[str, int] | None = None
) -> dict[str, Any]:
    """Print the report and return the summary's content."""
    from engine.cli.commit_log import show_pending

    report = StatusReport.read(store, store, job, runs=runs)
    _print_report(report, runs)
    batches = show_pending(store, job, max_attempts or {})
    lost = [x for dag in sorted(max_attempts or {}) for x in lost_scopes(store, job, dag)]
    if lost:
        table(
            f"lost state: runs are refused until it is restored or `checkpoint.action={START_OVER}` acknowledges it",
            ["dag", "scope", "datasets", "evidence"],
            [[x.dag, x.scope, len(x.datasets), "; ".join(x.evidence)] for x in lost],
        )
    return {
        "job": job,
        "status": Status.OK,
        "batches": batches,
        "runs": report.runs_summary(),
        "datasets": report.datasets_summary(),
        "changes": len(report.changes),
        "lost_state": [{"dag": x.dag, "scope": x.scope, "datasets": x.datasets} for x in lost],
    }


def _print_report(report: StatusReport, runs: int) -> None:
    table(
        f"last {runs} runs of {report.job}",
        ["run_id", "status", "start", "end", "datasets", "committed", "failed", "records", "message"],
        [
            [
                f.run_id,
                f.status.value,
                f.start_time,
                f.end_time,
                f.datasets,
                f.committed,
                f.failed,
                f.records,
                f.message[:80],
            ]
            for f in report.flows
        ],
    )
    table(
        "datasets (current watermarks)",
        ["dag", "scope", "dataset", "kind", "watermark", "set_by", "at", "how"],
        [
            [
                s.dag,
                s.scope,
                s.dataset,
                s.watermark.kind if s.watermark else "-",
                s.watermark.display() if s.watermark else "(none: reads from the start)",
                s.run_id,
                s.committed_at,
                s.note,
            ]
            for s in report.states
        ],
    )
    table(
        "datasets in the last run",
        ["dataset", "status", "records", "bytes", "executor_s", "low", "high", "message"],
        [
            [r.dataset, r.status.value, r.records, r.bytes, r.executor_seconds, r.low, r.high, r.message[:60]]
            for r in report.latest
        ],
    )
    failed = [r for r in report.latest if r.status == Status.FAILED and len(r.message) > 60]
    if failed:  # the table cuts messages; a refused batch's says which gate and what it saw
        print("\n== why datasets failed in the last run")
        for r in failed:
            print(f"   {r.dataset}: {r.message}")
    table(
        "checkpoint changes",
        ["at", "user", "action", "dataset", "old", "new", "reason"],
        [[c.changed_at, c.user, c.action, c.dataset, _shown(c.old), _shown(c.new), c.reason] for c in report.changes],
    )


def checkpoint(
    store: MetadataStore, job: str, dags: list[Any], req: CheckpointRequest, *, run_id: str, write: bool = True
) -> dict[str, Any]:
    """Apply ``req`` to one dataset of ``dags`` (the job's compiled DAG specs), or acknowledge a
    DAG's lost state; a change that makes the next run read a range again says what each sink of
    the DAG will do with it. With ``write`` false, only refuse a mistake, writing nothing (an
    empty answer otherwise)."""
    names = [d.name for d in dags]
    if req.action == START_OVER:
        return _start_over(store, job, names, req, run_id=run_id, write=write)

    def names_dataset(dag: str, urn: str) -> bool:
        spec = next(d for d in dags if d.name == dag)
        source = getattr(getattr(spec, "source", None), "conf", None)
        return source is not None and source.names_dataset(urn)

    change = change_checkpoint(store, job, names, req, run_id=run_id, names_dataset=names_dataset, write=write)
    if not write:
        return {}
    if change is None:
        return status_report(store, job)
    print(f"{change.action} {change.dataset}: {_shown(change.old)} -> {_shown(change.new)} ({change.reason})")
    out: dict[str, Any] = {
        "job": job,
        "status": Status.CHANGED,
        "action": change.action,
        "dataset": change.dataset,
        "old": json.loads(change.old)["value"] if change.old else None,
        "new": json.loads(change.new)["value"] if change.new else None,
    }
    if rereads(change):
        replays = rewind_effects.sink_replays(next(d for d in dags if d.name == change.dag))
        _warn_replay(change, replays)
        out["replay"] = rewind_effects.summary(replays)
    return out


def _warn_replay(change: CheckpointChange, replays: list[rewind_effects.SinkReplay]) -> None:
    after = "from its beginning" if change.new is None else f"after {_shown(change.new)}"
    table(
        f"the next run of DAG {change.dag} reads {change.dataset} again {after}; what its sinks do with the records",
        ["effect", "sink", "kind", "why"],
        [[r.effect, r.name, r.what, r.why] for r in replays],
    )
    advice = rewind_effects.advice(replays)
    if advice:
        print(f"\nwarning: {advice}")
        log.warning("checkpoint %s of %s: %s", change.action, change.dataset, advice)


def _start_over(
    store: MetadataStore, job: str, dags: list[str], req: CheckpointRequest, *, run_id: str, write: bool = True
) -> dict[str, Any]:
    """Acknowledge a DAG's lost state; refused when its state is not lost (``reset`` is for that)."""
    dag = dag_of(dags, req)
    lost = lost_scopes(store, job, dag)
    if not lost:
        raise ConfigError(
            f"the state of DAG `{dag}` is not lost, so there is nothing to start over; to read a dataset again, "
            "use checkpoint.action=reset checkpoint.dataset=<urn>",
            key="checkpoint.action",
        )
    if not req.reason or not req.reason.strip():
        raise ConfigError("say why: every checkpoint change is recorded with its reason", key="checkpoint.reason")
    if not write:
        return {}
    change = start_over(store, job, dag, {x.scope: x.datasets for x in lost}, reason=req.reason, run_id=run_id)
    for x in lost:
        print(f"{START_OVER} {dag} ({x.scope}): {len(x.datasets)} dataset(s) will be read from their beginning")
    return {
        "job": job,
        "status": Status.CHANGED,
        "action": START_OVER,
        "dag": dag,
        "scopes": {x.scope: x.datasets for x in lost},
        "reason": change.reason,
    }


def _shown(stored: str | None) -> str:
    mark = watermarks.parse(stored)
    return mark.display() if mark else "(none)"


def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    print(f"\n== {title}")
    if not cells:
        print("   (none)")
        return
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
