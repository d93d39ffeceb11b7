"""One status vocabulary for every outcome the engine records: a dataset's (JobStatus rows), a
DAG's, a run's (the runs table, the FlowStatus row, the summary line) and the CLI's own answers.

The members are ordered from best to worst and :meth:`Status.merge` keeps the worse of two, so an
outcome may be downgraded, never upgraded (Marmaray's ``IStatus.mergeStatus``): once a run has
failed, a later success cannot make it a success again. The values are the strings written to the
metadata tables and the JSON summary, so a ``Status`` compares equal to, and prints as, its string.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Status(enum.StrEnum):
    """From best to worst: declaration order is the merge order. A ``StrEnum``: formatted, a
    status is its value (``f"{s}"`` gives ``FAILED``, as the plain strings it replaced did)."""

    VALID = "VALID"
    """``mode=validate``: every DAG checked."""
    OK = "OK"
    """``mode=status`` and the ``show`` actions: a report, nothing changed."""
    CHANGED = "CHANGED"
    """``mode=checkpoint`` or ``mode=commit`` changed what the operator asked."""
    SUCCEEDED = "SUCCEEDED"
    """A DAG or a run: everything it planned is published (or there was nothing to do)."""
    COMMITTED = "COMMITTED"
    """A dataset: read, written and its watermark advanced."""
    EMPTY = "EMPTY"
    """A dataset: nothing new (or throttled out this run); the watermark is carried forward."""
    RUNNING = "RUNNING"
    """A DAG that has started and not yet ended (the runs table's first row of it)."""
    PARTIAL = "PARTIAL"
    """A DAG or a run: some of it was published, some failed."""
    ROLLED_BACK = "ROLLED_BACK"
    """A dataset read fine but not published (``policy = full`` and another dataset failed)."""
    SKIPPED = "SKIPPED"
    """Not run: a DAG it runs ``after`` did not succeed."""
    QUARANTINED = "QUARANTINED"
    """Its DAG's last batch could not be published after ``publish.max_attempts`` tries: the DAG
    is skipped until an operator releases or abandons the batch (``mode=commit``)."""
    FAILED = "FAILED"
    """It failed: a dataset's watermark stays at the low watermark."""
    BUSY = "BUSY"
    """Another run of the job holds its lease: nothing was done."""
    CONFIG_ERROR = "CONFIG_ERROR"
    """The config or the command line is wrong: nothing was done."""
    CANCELLED = "CANCELLED"
    """The run was stopped (SIGTERM/SIGINT) before this was published: nothing of it is visible
    and the next run reads it again. Worst of all, so one stopped run marks a multirun stopped."""

    @property
    def rank(self) -> int:
        """Position in the merge order: the higher, the worse."""
        return _RANK[self]

    @property
    def ok(self) -> bool:
        """Whether a run ending so exits 0."""
        return self in OK_STATUSES

    @property
    def published_some(self) -> bool:
        """Whether a DAG ending so published at least part of its batch."""
        return self in (Status.SUCCEEDED, Status.PARTIAL)

    def merge(self, other: Status | str) -> Status:
        """The worse of ``self`` and ``other``: merging downgrades, never upgrades."""
        theirs = Status(other)
        return theirs if theirs.rank > self.rank else self

    @classmethod
    def worst(cls, statuses: Iterable[Status | str], *, start: Status | None = None) -> Status:
        """Every status of ``statuses`` merged into ``start`` (by default the best outcome of a
        run, ``SUCCEEDED``)."""
        merged = start or cls.SUCCEEDED
        for status in statuses:
            merged = merged.merge(status)
        return merged

    @classmethod
    def of(cls, value: object) -> Status:
        """``value`` as a status; anything that is none of them (a summary without one) is
        ``FAILED``, as the exit code treats it."""
        return cls(value) if isinstance(value, str) and value in _VALUES else cls.FAILED


_RANK = {status: rank for rank, status in enumerate(Status)}
_VALUES = frozenset(s.value for s in Status)

OK_STATUSES = frozenset({Status.SUCCEEDED, Status.VALID, Status.OK, Status.CHANGED})
"""A run's summary status that exits 0."""


def dag_outcome(datasets: Iterable[Status | str], *, published: bool) -> Status:
    """A DAG's outcome from its datasets': ``CANCELLED`` when it was stopped, ``SUCCEEDED`` when
    none failed or was rolled back (every one committed or had nothing new), ``PARTIAL`` when some
    of it was published anyway (``published``: a records DAG's committed dataset, a copy DAG's
    published file), else ``FAILED``."""
    worst = Status.worst(datasets)
    if worst is Status.CANCELLED:
        return Status.CANCELLED
    if worst.rank < Status.ROLLED_BACK.rank:
        return Status.SUCCEEDED
    return Status.PARTIAL if published else Status.FAILED


def run_outcome(dags: Iterable[Status | str], *, published: bool = False, cancelled: bool = False) -> Status:
    """A run's outcome from its DAGs' (the FlowStatus row, the summary): ``CANCELLED`` when it was
    stopped, ``SUCCEEDED`` when every DAG succeeded, ``PARTIAL`` when anything was published (a DAG
    that succeeded or partly did, or ``published``: a committed dataset), else ``FAILED``."""
    statuses = [Status(d) for d in dags]
    if cancelled:
        return Status.CANCELLED
    if Status.worst(statuses) is Status.SUCCEEDED:
        return Status.SUCCEEDED
    if published or any(s.published_some for s in statuses):
        return Status.PARTIAL
    return Status.FAILED


def multirun_outcome(runs: Iterable[object]) -> Status:
    """A multirun's outcome from its runs' summary statuses: ``SUCCEEDED`` when every run's exits
    0, ``CANCELLED`` when one was stopped, else ``FAILED``."""
    worst = Status.worst((Status.of(r) for r in runs), start=Status.VALID)
    if worst.ok:
        return Status.SUCCEEDED
    return Status.CANCELLED if worst is Status.CANCELLED else Status.FAILED
