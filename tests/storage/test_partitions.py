"""The one date-partition layout that the files source and copy jobs share."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from engine.storage.partitions import PartitionLayout


@pytest.mark.parametrize(
    ("pattern", "partition", "start"),
    [
        ("yyyy/MM/dd", "2026/11/27", datetime(2026, 11, 27)),
        ("dt=yyyy-MM-dd/HH", "dt=2026-11-27/05", datetime(2026, 11, 27, 5)),
        ("yyyy/MM", "2026/02", datetime(2026, 2, 1)),
        ("yyyy/MM/dd", "2026/13/01", None),  # no such month: not a partition (it used to stop planning)
        ("yyyy/MM/dd", "2026/02/30", None),
        ("yyyy/MM/dd", "2026/11", None),
        ("dt=yyyy-MM-dd", "dt=2026.11.27", None),  # literal text is literal, not a regex
    ],
)
def test_a_partition_begins_at_the_date_its_path_spells(pattern: str, partition: str, start: datetime | None) -> None:
    layout = PartitionLayout(pattern)
    assert layout.start(partition) == start
    assert layout.day(partition) == (start.date() if start else None)
    assert layout.start_of(f"{partition}/part-0.json") == start


def test_a_partition_ends_where_the_next_begins() -> None:
    assert PartitionLayout("yyyy/MM/dd/HH").end_of(datetime(2026, 12, 31, 23)) == datetime(2027, 1, 1)
    assert PartitionLayout("yyyy/MM/dd").end_of(datetime(2026, 2, 28)) == datetime(2026, 3, 1)
    assert PartitionLayout("yyyy/MM").end_of(datetime(2026, 12, 1)) == datetime(2027, 1, 1)
    assert PartitionLayout("yyyy").end_of(datetime(2026, 1, 1)) == datetime(2027, 1, 1)
    assert (PartitionLayout("yyyy/MM/dd").depth, PartitionLayout("dt=yyyy-MM-dd").depth) == (3, 1)
    assert PartitionLayout("yyyy/MM/dd").day("2026/11/27") == date(2026, 11, 27)


def test_a_file_deeper_below_a_partition_belongs_to_it_but_its_directory_is_not_one() -> None:
    layout = PartitionLayout("yyyy/MM/dd")
    assert layout.start("2026/11/27/late") is None
    assert layout.start_of("2026/11/27/late/part-0.json") == datetime(2026, 11, 27)
