"""Work units: sizes, budgets, throttling (``take``) and LPT packing (``pack``). No Spark."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine.sources.workunits import Budget, Candidate, MultiWorkUnit, Size, WorkUnit, pack, take
from engine.state.watermarks import LongWatermark

UNLIMITED = Budget()


def of_bytes(n: int) -> Size:
    return Size(bytes=n)


def cand(dataset: str, sizes: Sequence[int], rank: int = 0) -> Candidate[int]:
    return Candidate(dataset=dataset, items=list(sizes), rank=rank)


def unit(name: str, *, bytes_: int | None = None, records: int | None = None, empty: bool = False) -> WorkUnit:
    low = LongWatermark(0)
    if empty:
        return WorkUnit.carry(name, low, "no new data")
    return WorkUnit(dataset=name, low=low, high=LongWatermark(1), size=Size(records=records, bytes=bytes_))


def loads(groups: list[MultiWorkUnit]) -> list[float]:
    return sorted(g.load for g in groups)


def test_size_adds_per_dimension_and_keeps_unknown_as_none() -> None:
    assert Size(1, 2, 3) + Size(10, 20, 30) == Size(11, 22, 33)
    assert Size(records=5) + Size(bytes=7) == Size(records=5, bytes=7, files=None)
    assert Size() + Size() == Size()


def test_budget_fits_within_every_limit_and_counts_unknown_as_zero() -> None:
    budget = Budget(max_records=10, max_bytes=100)
    assert budget.fits(Size(records=10, bytes=100, files=10_000))
    assert not budget.fits(Size(records=11, bytes=1))
    assert not budget.fits(Size(records=1, bytes=101))
    assert budget.fits(Size())
    assert not budget.unlimited
    assert UNLIMITED.unlimited
    assert UNLIMITED.fits(Size(10**12, 10**12, 10**12))


def test_a_carried_unit_is_empty_and_keeps_its_watermark() -> None:
    low = LongWatermark(7)
    carried = WorkUnit.carry("ds", low, "throttled")
    assert (carried.empty, carried.low, carried.high, carried.note) == (True, low, low, "throttled")


def test_unlimited_budgets_take_everything_unthrottled() -> None:
    chosen = take([cand("a", [5, 50, 500]), cand("b", [1])], of_bytes, per_dataset=UNLIMITED, per_run=UNLIMITED)
    assert chosen == {"a": ([5, 50, 500], False), "b": ([1], False)}


def test_per_dataset_budget_keeps_a_prefix_of_each_dataset() -> None:
    chosen = take(
        [cand("a", [3, 3, 3, 3]), cand("b", [2, 2]), cand("c", [4, 10, 1])],
        of_bytes,
        per_dataset=Budget(max_bytes=7),
        per_run=UNLIMITED,
    )
    assert chosen["a"] == ([3, 3], True)
    assert chosen["b"] == ([2, 2], False)
    # a prefix: the small item after the one that does not fit is not picked
    assert chosen["c"] == ([4], True)


def test_per_dataset_budget_takes_one_oversized_item_rather_than_stall() -> None:
    chosen = take([cand("a", [10, 1])], of_bytes, per_dataset=Budget(max_bytes=5), per_run=UNLIMITED)
    assert chosen["a"] == ([10], True)


def test_per_dataset_budget_counts_files() -> None:
    chosen = take([cand("a", [1, 1, 1])], lambda _: Size(files=1), per_dataset=Budget(max_files=2), per_run=UNLIMITED)
    assert chosen["a"] == ([1, 1], True)


def test_run_budget_walks_datasets_by_rank_lowest_first() -> None:
    candidates = [cand("late", [4, 4], rank=2), cand("early", [4, 4], rank=1)]
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=10))
    assert chosen["early"] == ([4, 4], False)
    assert chosen["late"] == ([], True)


def test_run_budget_left_over_goes_to_the_next_dataset_as_a_prefix() -> None:
    candidates = [cand("b", [4, 4, 4], rank=2), cand("a", [4, 4], rank=1)]
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=12))
    assert chosen == {"a": ([4, 4], False), "b": ([4], True)}


def test_rank_can_be_any_comparable_such_as_last_commit_time() -> None:
    candidates = [cand("b", [6]), cand("a", [6])]
    candidates[0].rank, candidates[1].rank = "2026-11-02", "2026-11-01"
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=10))
    assert chosen == {"a": ([6], False), "b": ([], True)}


def test_first_dataset_gets_one_oversized_item_and_later_datasets_get_nothing() -> None:
    candidates = [cand("first", [10, 1], rank=0), cand("second", [1], rank=1), cand("third", [1, 1], rank=2)]
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=5))
    assert chosen["first"] == ([10], True)
    assert chosen["second"] == ([], True)
    assert chosen["third"] == ([], True)


def test_a_later_dataset_gets_no_oversized_item_when_the_first_took_some() -> None:
    candidates = [cand("first", [2], rank=0), cand("second", [10], rank=1)]
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=5))
    assert chosen == {"first": ([2], False), "second": ([], True)}


def test_a_dataset_with_nothing_to_read_does_not_use_up_the_first_item_guarantee() -> None:
    candidates = [cand("idle", [], rank=0), cand("busy", [10], rank=1)]
    chosen = take(candidates, of_bytes, per_dataset=UNLIMITED, per_run=Budget(max_bytes=5))
    assert chosen["idle"] == ([], False)
    assert chosen["busy"] == ([10], False)


def test_both_levels_apply_together() -> None:
    candidates = [cand("a", [3, 3, 3], rank=0), cand("b", [3, 3, 3], rank=1)]
    chosen = take(candidates, of_bytes, per_dataset=Budget(max_bytes=6), per_run=Budget(max_bytes=9))
    assert chosen == {"a": ([3, 3], True), "b": ([3], True)}


def test_pack_leaves_out_empty_units() -> None:
    groups = pack([unit("a", bytes_=5), unit("skip", empty=True), unit("b", bytes_=3)], max_groups=4)
    assert sorted(d for g in groups for d in g.datasets) == ["a", "b"]
    assert pack([unit("x", empty=True), unit("y", empty=True)], max_groups=4) == []
    assert pack([], max_groups=4) == []


@pytest.mark.parametrize(("units", "max_groups", "expected"), [(3, 8, 3), (6, 2, 2), (4, 4, 4), (1, 1, 1), (3, 0, 1)])
def test_pack_makes_min_of_units_and_max_groups(units: int, max_groups: int, expected: int) -> None:
    work = [unit(f"d{i}", bytes_=i + 1) for i in range(units)] + [unit("e", empty=True)]
    groups = pack(work, max_groups=max_groups)
    assert len(groups) == expected
    assert all(g.units for g in groups)
    assert sorted(d for g in groups for d in g.datasets) == sorted(f"d{i}" for i in range(units))


def test_pack_balances_by_bytes_with_the_lpt_rule() -> None:
    # LPT, largest first into the lightest group: 10->A, 9->B, 8->B(17), 3->A(13), 2->A(15), 1->A(16)
    work = [unit(f"s{n}", bytes_=n) for n in (3, 10, 1, 8, 2, 9)]
    groups = pack(work, max_groups=2)
    assert loads(groups) == [16.0, 17.0]
    assert sorted(sorted(g.datasets) for g in groups) == [["s1", "s10", "s2", "s3"], ["s8", "s9"]]


def test_pack_uses_records_when_bytes_are_unknown() -> None:
    work = [unit("r3", records=3), unit("r5", records=5), unit("r4", records=4)]
    groups = pack(work, max_groups=2)
    assert loads(groups) == [5.0, 7.0]
    assert sorted(sorted(g.datasets) for g in groups) == [["r3", "r4"], ["r5"]]


def test_pack_spreads_units_with_no_size_information() -> None:
    groups = pack([unit(f"u{i}") for i in range(6)], max_groups=3)
    assert [len(g.units) for g in groups] == [2, 2, 2]
    assert loads(groups) == [2.0, 2.0, 2.0]
