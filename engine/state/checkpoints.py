"""Operating the checkpoints: show, set, reset or rewind a dataset's live watermark, or start a
DAG over whose state was lost (``start_over``, see :mod:`engine.runtime.lost_state`).

Every change is a new state row (the newest wins, so history is kept) plus a row in the
checkpoint changes table: who, when, the old and new value, and why. A reason is required.

A change that moves a watermark back (:func:`rereads`) makes the next run read a range again, as
a new batch: sinks that append receive those records twice (``engine.cli.rewind_effects`` says which).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import ConfigError
from engine.state.errors import START_OVER
from engine.state.rows import LIVE, CheckpointChange, DatasetState, utcnow
from engine.state.store import StateStore
from engine.state.watermarks import KINDS, Watermark, parse, parse_cli

ACTIONS = ("show", "set", "reset", "rewind", START_OVER)


@dataclass(frozen=True)
class CheckpointRequest:
    action: str
    dataset: str | None = None
    value: str | None = None
    kind: str | None = None
    reason: str | None = None
    dag: str | None = None


def change_checkpoint(
    store: StateStore,
    job: str,
    dags: list[str],
    req: CheckpointRequest,
    *,
    run_id: str,
    names_dataset: Callable[[str, str], bool] = lambda dag, urn: False,
    write: bool = True,
) -> CheckpointChange | None:
    """Apply ``req`` (``show`` changes nothing and returns ``None``); with ``write`` false, only
    refuse a mistake (:class:`ConfigError`), writing nothing. A dataset no run of the DAG has a
    state of is refused, listing the DAG's, unless ``set`` names one its source reads
    (``names_dataset(dag, urn)``: a topic it is to start at an offset, say)."""
    if req.action not in ACTIONS:
        raise ConfigError(
            f"unknown checkpoint action `{req.action}`; use one of: {', '.join(ACTIONS)}", key="checkpoint.action"
        )
    if req.action == "show":
        return None
    if req.action == START_OVER:
        raise ConfigError(f"`{START_OVER}` changes a whole DAG: see start_over()", key="checkpoint.action")
    if not req.dataset:
        raise ConfigError("name the dataset URN to change (see mode=status)", key="checkpoint.dataset")
    if not req.reason or not req.reason.strip():
        raise ConfigError("say why: every checkpoint change is recorded with its reason", key="checkpoint.reason")
    dag = _dag_of(store, job, dags, req)
    state = store.load_state(job, dag, LIVE)
    current = state.get(req.dataset)
    if current is None and not (req.action == "set" and names_dataset(dag, req.dataset)):
        known = ", ".join(sorted(state)) or "none yet (no run has read any)"
        raise ConfigError(
            f"DAG `{dag}` of job `{job}` has no dataset `{req.dataset}`; its datasets: {known} "
            "(mode=status lists them)",
            key="checkpoint.dataset",
        )
    old = current.watermark if current else None
    new = _new_value(req, old)
    if not write:
        return None
    now = utcnow()
    store.save_state([DatasetState(job, dag, LIVE, req.dataset, new, run_id, now, note=req.action)])
    change = CheckpointChange(
        job=job,
        dag=dag,
        dataset=req.dataset,
        action=req.action,
        old=old.to_json() if old else None,
        new=new.to_json() if new else None,
        reason=req.reason.strip(),
        user=_user(),
        changed_at=now,
    )
    store.add_change(change)
    return change


def rereads(change: CheckpointChange) -> bool:
    """Whether the next run reads again what was already read: the watermark moved back (a reset
    of a dataset that had one, a rewind, or a ``set`` to an earlier value)."""
    old, new = parse(change.old), parse(change.new)
    if old is None:
        return False
    return new is None or (new.at_most(old) and not old.at_most(new))


def start_over(
    store: StateStore, job: str, dag: str, lost: dict[str, list[str]], *, reason: str | None, run_id: str
) -> CheckpointChange:
    """Acknowledge that ``dag``'s state was lost: a ``start_over`` row with no watermark for every
    dataset of every scope in ``lost`` (scope -> datasets), so the next run reads them from their
    beginning on purpose, and one change row saying so."""
    if not reason or not reason.strip():
        raise ConfigError("say why: every checkpoint change is recorded with its reason", key="checkpoint.reason")
    now = utcnow()
    states = [
        DatasetState(job, dag, scope, d, None, run_id, now, note=START_OVER) for scope, ds in lost.items() for d in ds
    ]
    store.save_state(states)
    every = f"* (all {len(states)} dataset(s) of DAG {dag})"
    change = CheckpointChange(job, dag, every, START_OVER, None, None, reason.strip(), _user(), now)
    store.add_change(change)
    return change


def dag_of(job_dags: list[str], req: CheckpointRequest) -> str:
    """The DAG a whole-DAG action applies to: ``checkpoint.dag``, or the job's only DAG."""
    if req.dag:
        if req.dag not in job_dags:
            raise ConfigError(f"the job has no DAG `{req.dag}`; DAGs: {', '.join(job_dags)}", key="checkpoint.dag")
        return req.dag
    if len(job_dags) == 1:
        return job_dags[0]
    raise ConfigError(f"say which DAG (checkpoint.dag=...); DAGs: {', '.join(job_dags)}", key="checkpoint.dag")


def _new_value(req: CheckpointRequest, old: Watermark | None) -> Watermark | None:
    if req.action == "reset":
        return None  # the next run starts from the beginning of the dataset
    if req.value is None:
        raise ConfigError(f"`{req.action}` needs the new watermark", key="checkpoint.value")
    kind = req.kind or (old.kind if old else None)
    if kind is None:
        raise ConfigError(
            f"the dataset has no watermark yet: give its kind ({', '.join(KINDS)})", key="checkpoint.kind"
        )
    if kind not in KINDS:
        raise ConfigError(f"unknown watermark kind `{kind}`; use one of: {', '.join(KINDS)}", key="checkpoint.kind")
    if old is not None and kind != old.kind:
        raise ConfigError(f"the dataset's watermark is a {old.kind}, not a {kind}", key="checkpoint.kind")
    new = parse_cli(kind, req.value)
    if req.action == "rewind":
        if old is None:
            raise ConfigError("nothing to rewind: the dataset has no watermark", key="checkpoint.dataset")
        if not new.at_most(old):
            raise ConfigError(
                f"rewind moves a watermark back; {new.display()} is after the current {old.display()} (use `set`)",
                key="checkpoint.value",
            )
    return new.checkpointed(req.action, old)


def _dag_of(store: StateStore, job: str, dags: list[str], req: CheckpointRequest) -> str:
    """The DAG a dataset's change applies to: as :func:`dag_of`, except that with several DAGs
    and none named, the one whose live state holds the dataset."""
    if req.dag or len(dags) == 1:
        return dag_of(dags, req)
    owners = sorted(
        {s.dag for s in store.all_state(job) if s.dataset == req.dataset and s.scope == LIVE and s.dag in dags}
    )
    if len(owners) != 1:
        raise ConfigError(
            f"say which DAG the dataset belongs to (checkpoint.dag=...); DAGs: {', '.join(dags)}",
            key="checkpoint.dag",
        )
    return owners[0]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return "unknown"
