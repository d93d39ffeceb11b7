"""One date-partition layout for every reader of partitioned directories: the files source's
``partitioned`` datasets (:mod:`engine.sources.file_planning`) and copy jobs' ``date_partitioned``
datasets (:mod:`engine.copy.listing`)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

FIELDS = {"yyyy": r"(?P<y>\d{4})", "MM": r"(?P<m>\d{2})", "dd": r"(?P<d>\d{2})", "HH": r"(?P<h>\d{2})"}
"""The date fields a layout may use; everything else in it is literal text."""


class PartitionLayout:
    """A layout such as ``yyyy/MM/dd`` or ``dt=yyyy-MM-dd/HH``: a partition is a directory path
    below a dataset's root whose segments spell a date (and hour)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        body = "".join(FIELDS.get(part, re.escape(part)) for part in re.split(r"(yyyy|MM|dd|HH)", pattern))
        self._partition = re.compile(body + r"\Z")
        self._below = re.compile(body + "/")
        self.unit = "h" if "HH" in pattern else "d" if "dd" in pattern else "m" if "MM" in pattern else "y"
        """The span of one partition: an hour, a day, a month or a year."""

    @property
    def depth(self) -> int:
        """How many path segments a partition takes."""
        return self.pattern.count("/") + 1

    def start(self, partition: str) -> datetime | None:
        """When the partition ``partition`` (its path below the root) begins; ``None`` if it does
        not follow the layout or names no real date (``2026/13/01``)."""
        return _start(self._partition.match(partition))

    def start_of(self, relative: str) -> datetime | None:
        """When the partition of the file at ``relative`` (below the root) begins, as :meth:`start`."""
        return _start(self._below.match(relative))

    def day(self, partition: str) -> date | None:
        found = self.start(partition)
        return found.date() if found is not None else None

    def end_of(self, start: datetime) -> datetime:
        """When the partition that begins at ``start`` ends."""
        if self.unit == "h":
            return start + timedelta(hours=1)
        if self.unit == "d":
            return start + timedelta(days=1)
        if self.unit == "m":
            return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        return start.replace(year=start.year + 1)


def _start(found: re.Match[str] | None) -> datetime | None:
    if found is None:
        return None
    g = found.groupdict()
    try:
        return datetime(int(g["y"]), int(g.get("m") or 1), int(g.get("d") or 1), int(g.get("h") or 0))
    except ValueError:
        return None
