"""Work units, throttling and packing into multi-work-units. No Spark here.

A :class:`WorkUnit` is one dataset's slice for this run: ``(low, expected_high]`` plus what the
source needs to read it (``payload``: files, a version range, column bounds) and size estimates.
A dataset with nothing to read, or throttled out, still gets a work unit, an *empty* one whose
expected high equals its low, so its watermark is carried forward.

Throttling (:func:`take`) keeps a prefix of each dataset's ordered items (files, versions) within
the per-dataset limits, then walks the datasets, least recently committed first, within the run's
limits. The first dataset always gets at least one item, so a single item bigger than a limit
cannot stall the job.

Packing (:func:`pack`) is the longest-processing-time rule: non-empty work units sorted by
estimated bytes (then records, files), largest first, each put into the currently lightest of
``min(#units, max_groups)`` multi-work-units. Each multi-work-unit is read, converted and counted
as one Spark job and is the unit of failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from engine.state.watermarks import Watermark


@dataclass(frozen=True)
class Size:
    records: int | None = None
    bytes: int | None = None
    files: int | None = None

    def __add__(self, other: Size) -> Size:
        def plus(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Size(plus(self.records, other.records), plus(self.bytes, other.bytes), plus(self.files, other.files))


@dataclass(frozen=True)
class Budget:
    """Limits of one throttling level; ``None`` means unlimited."""

    max_records: int | None = None
    max_bytes: int | None = None
    max_files: int | None = None

    def fits(self, size: Size) -> bool:
        return all(
            limit is None or (used or 0) <= limit
            for limit, used in (
                (self.max_records, size.records),
                (self.max_bytes, size.bytes),
                (self.max_files, size.files),
            )
        )

    def tighter(self, other: Budget) -> Budget:
        """Each limit the smaller of the two."""

        def low(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        return Budget(
            low(self.max_records, other.max_records),
            low(self.max_bytes, other.max_bytes),
            low(self.max_files, other.max_files),
        )

    def minus(self, used: Size) -> Budget:
        """What is left of this budget after ``used`` (never below zero)."""

        def left(limit: int | None, spent: int | None) -> int | None:
            return None if limit is None else max(0, limit - (spent or 0))

        return Budget(
            left(self.max_records, used.records), left(self.max_bytes, used.bytes), left(self.max_files, used.files)
        )

    @property
    def unlimited(self) -> bool:
        return self.max_records is None and self.max_bytes is None and self.max_files is None


@dataclass
class WorkUnit:
    dataset: str
    low: Watermark | None
    high: Watermark | None
    """The expected high watermark: where this run means to stop."""
    size: Size = field(default_factory=Size)
    payload: Any = None
    note: str = ""
    """Why a unit is empty (``no new data``, ``throttled``) or anything else worth reporting."""
    empty: bool = False
    records: int = 0
    """Actual records read (after the run)."""
    executor_seconds: float = 0.0

    @classmethod
    def carry(cls, dataset: str, low: Watermark | None, note: str) -> WorkUnit:
        """An empty unit: nothing to read, the watermark carried forward."""
        return cls(dataset=dataset, low=low, high=low, note=note, empty=True)


@dataclass
class MultiWorkUnit:
    units: list[WorkUnit]
    load: float = 0.0

    @property
    def datasets(self) -> list[str]:
        return [u.dataset for u in self.units]


T = TypeVar("T")


@dataclass
class Candidate(Generic[T]):
    """One dataset's ordered items before throttling; ``rank`` orders datasets (lower first)."""

    dataset: str
    items: Sequence[T]
    rank: Any = 0


def take(
    candidates: list[Candidate[T]],
    size_of: Callable[[T], Size],
    *,
    per_dataset: Budget,
    per_run: Budget,
    guarantee: bool = True,
) -> dict[str, tuple[list[T], bool]]:
    """The items each dataset reads this run, and whether it was throttled. ``guarantee``: the
    first dataset gets at least one item even beyond ``per_run`` (off when a job-level budget is
    shared with DAGs planned before)."""
    chosen: dict[str, tuple[list[T], bool]] = {}
    used = Size(0, 0, 0)
    first = guarantee
    for cand in sorted(candidates, key=lambda c: c.rank):
        items = _prefix(cand.items, size_of, per_dataset, Size(0, 0, 0), at_least_one=True)
        kept = _prefix(items, size_of, per_run, used, at_least_one=first and bool(items))
        for item in kept:
            used = used + size_of(item)
        first = first and not kept
        chosen[cand.dataset] = (kept, len(kept) < len(cand.items))
    return chosen


def _prefix(
    items: Sequence[T], size_of: Callable[[T], Size], budget: Budget, start: Size, *, at_least_one: bool
) -> list[T]:
    if budget.unlimited:
        return list(items)
    kept: list[T] = []
    total = start
    for item in items:
        grown = total + size_of(item)
        if not budget.fits(grown) and not (at_least_one and not kept):
            break
        kept.append(item)
        total = grown
    return kept


def pack(units: list[WorkUnit], *, max_groups: int) -> list[MultiWorkUnit]:
    """Pack non-empty units into at most ``max_groups`` balanced multi-work-units (LPT rule)."""
    work = [u for u in units if not u.empty]
    if not work:
        return []
    groups = [MultiWorkUnit(units=[]) for _ in range(min(len(work), max(1, max_groups)))]
    for unit in sorted(work, key=_weight, reverse=True):
        lightest = min(groups, key=lambda g: g.load)
        lightest.units.append(unit)
        bytes_, records, files = _weight(unit)
        lightest.load += bytes_ or records or files or 1
    return groups


def _weight(unit: WorkUnit) -> tuple[float, float, float]:
    s = unit.size
    return (float(s.bytes or 0), float(s.records or 0), float(s.files or 0))
