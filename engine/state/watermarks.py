"""Watermarks: where a dataset's reading stopped. Pure values, no Spark.

A work unit reads ``(low, expected_high]``; when it commits, its *actual* high watermark becomes
the dataset's stored watermark and the next run's low. Every kind serialises to a small JSON
object (``to_json``/``parse``) kept in the state table, and parses from the command line
(``parse_cli``) for ``mode=checkpoint``.

- :class:`LongWatermark`: an offset, a table version, an id.
- :class:`TimestampWatermark`: a UTC timestamp (naive, microseconds).
- :class:`MultiLongWatermark`: one long per partition (a Kafka-style topic); ordered only when
  every partition is (``<=`` is element-wise).
- :class:`FileWatermark`: the last file read, ordered by (modification time, path); the files read
  are in the file log, so a late file (an older modification time, delivered later) is still read.
- :class:`ManifestWatermark`: a copy dataset's record of what it published (a manifest file).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, ClassVar

from engine.errors import ConfigError


class Watermark(ABC):
    kind: ClassVar[str]

    @abstractmethod
    def payload(self) -> Any: ...

    @classmethod
    @abstractmethod
    def from_payload(cls, value: Any) -> Watermark: ...

    @abstractmethod
    def at_most(self, other: Watermark) -> bool:
        """``self <= other`` for this kind (a different kind is never comparable)."""

    def display(self) -> str:
        return str(self.payload())

    def moment(self) -> datetime | None:
        """The point in time this watermark stands for (UTC, naive), if it is one: what its lag
        behind now is measured from. ``None`` for offsets and counters."""
        return None

    def checkpointed(self, action: str, old: Watermark | None) -> Watermark:
        """This value as ``mode=checkpoint`` stores it for ``action`` (``set``/``rewind``) over the
        dataset's ``old`` watermark; most kinds store it as it is."""
        return self

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "value": self.payload()}, sort_keys=True)


@dataclass(frozen=True, order=True)
class LongWatermark(Watermark):
    value: int
    kind: ClassVar[str] = "long"

    def payload(self) -> int:
        return self.value

    @classmethod
    def from_payload(cls, value: Any) -> LongWatermark:
        return cls(int(value))

    def at_most(self, other: Watermark) -> bool:
        return isinstance(other, LongWatermark) and self.value <= other.value


@dataclass(frozen=True, order=True)
class TimestampWatermark(Watermark):
    value: datetime
    kind: ClassVar[str] = "timestamp"

    def __post_init__(self) -> None:
        if self.value.tzinfo is not None:  # stored as naive UTC
            object.__setattr__(self, "value", self.value.astimezone(timezone.utc).replace(tzinfo=None))

    def payload(self) -> str:
        return self.value.isoformat(sep=" ")

    @classmethod
    def from_payload(cls, value: Any) -> TimestampWatermark:
        return cls(value if isinstance(value, datetime) else parse_timestamp(str(value)))

    def at_most(self, other: Watermark) -> bool:
        return isinstance(other, TimestampWatermark) and self.value <= other.value

    def moment(self) -> datetime:
        return self.value


@dataclass(frozen=True)
class MultiLongWatermark(Watermark):
    values: tuple[int, ...]
    kind: ClassVar[str] = "multi_long"

    def payload(self) -> list[int]:
        return list(self.values)

    @classmethod
    def from_payload(cls, value: Any) -> MultiLongWatermark:
        return cls(tuple(int(v) for v in value))

    def at_most(self, other: Watermark) -> bool:
        return (
            isinstance(other, MultiLongWatermark)
            and len(self.values) == len(other.values)
            and all(a <= b for a, b in zip(self.values, other.values, strict=True))
        )


LAST_PATH = "\U0010ffff"
"""Sorts after every path: ``(mtime, LAST_PATH)`` is at or after every file of that millisecond."""


@dataclass(frozen=True)
class FileWatermark(Watermark):
    """The last file read, by (modification time, path).

    Which files a dataset has read is kept in the file log (``_engine/files_read``), not here: a
    file at or before this position that the log lacks is a *late* file, read whatever its
    modification time. ``floor`` is where that stops: files at or before it count as read
    whether the log has them or not (set by ``checkpoint.action=set``, which skips what came
    before). A watermark stored before the file log existed (``legacy``) kept instead the paths
    read within the look-back window before it (``recent``); the files source turns it into a
    floor the first time it advances it."""

    mtime_ms: int
    path: str
    recent: tuple[str, ...] = ()
    """Legacy watermarks only: the paths read within the look-back window (carried forward)."""
    floor: tuple[int, str] | None = None
    """Files at or before this (mtime, path) count as read even where the file log lacks them."""
    legacy: bool = False
    """Stored before the file log existed (no ``floor`` key): its look-back window is the floor."""
    kind: ClassVar[str] = "file"

    @property
    def position(self) -> tuple[int, str]:
        return (self.mtime_ms, self.path)

    def moment(self) -> datetime:
        """The last file's modification time."""
        return datetime.fromtimestamp(self.mtime_ms / 1000, timezone.utc).replace(tzinfo=None)

    @property
    def logged(self) -> bool:
        """Whether the file log must hold files of this dataset: a run read files up to here (a
        watermark set by a checkpoint counts everything before it as read, and one stored before
        the log knew nothing of it)."""
        return not self.legacy and (self.floor is None or self.floor < self.position)

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mtime_ms": self.mtime_ms, "path": self.path}
        if self.recent or self.legacy:
            out["recent"] = list(self.recent)
        if not self.legacy:  # its presence says the file log holds what was read
            out["floor"] = list(self.floor) if self.floor else None
        return out

    @classmethod
    def from_payload(cls, value: Any) -> FileWatermark:
        floor = value.get("floor")
        return cls(
            int(value["mtime_ms"]),
            str(value["path"]),
            tuple(value.get("recent", ())),
            floor=(int(floor[0]), str(floor[1])) if floor else None,
            legacy="floor" not in value,
        )

    def at_most(self, other: Watermark) -> bool:
        return isinstance(other, FileWatermark) and self.position <= other.position

    def checkpointed(self, action: str, old: Watermark | None) -> FileWatermark:
        """``set``: everything at or before it counts as read. ``rewind``: what comes after it is
        read again, and late files before it still are (the file log knows what was read), except
        before a floor the old watermark had, or anywhere before it if the old one predates the
        file log (which then knows nothing of what was read). A watermark advanced since it predated
        the log keeps the paths it knew were read within its old look-back window: the log lacks
        them, and they are consulted only for files at or before the rewound position."""
        if action == "set":
            return replace(self, floor=self.position, recent=(), legacy=False)
        floor: tuple[int, str] | None = None
        recent: tuple[str, ...] = ()
        if isinstance(old, FileWatermark):
            floor = self.position if old.legacy else min(old.floor, self.position) if old.floor else None
            recent = () if old.legacy else old.recent
        return replace(self, floor=floor, recent=recent, legacy=False)

    def display(self) -> str:
        when = datetime.fromtimestamp(self.mtime_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return f"{when} {self.path}"


@dataclass(frozen=True)
class ManifestWatermark(Watermark):
    """A copy dataset's published files: the manifest file listing them (source path, guid, the
    outputs at the target), written before the commit sequence that publishes them."""

    path: str
    files: int
    bytes: int
    kind: ClassVar[str] = "manifest"

    def payload(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes}

    @classmethod
    def from_payload(cls, value: Any) -> ManifestWatermark:
        return cls(str(value["path"]), int(value["files"]), int(value["bytes"]))

    def at_most(self, other: Watermark) -> bool:
        return isinstance(other, ManifestWatermark)

    def display(self) -> str:
        return f"{self.files} files, {self.bytes} bytes"


KINDS: dict[str, type[Watermark]] = {
    k.kind: k for k in (LongWatermark, TimestampWatermark, MultiLongWatermark, FileWatermark, ManifestWatermark)
}


def parse(text: str | None) -> Watermark | None:
    """A watermark from its stored JSON (``None`` for none)."""
    if not text:
        return None
    data = json.loads(text)
    kind = KINDS.get(data.get("kind"))
    if kind is None:
        raise ConfigError(f"unknown watermark kind `{data.get('kind')}` in the state table")
    return kind.from_payload(data["value"])


def parse_cli(kind: str, text: str, *, key: str = "checkpoint.value") -> Watermark:
    """A watermark of ``kind`` typed by a user: ``42``, ``2026-11-01 10:00:00``, ``[1,2,3]``,
    ``<epoch ms or timestamp>|<path>`` for files."""
    try:
        if kind == "long":
            return LongWatermark(int(text))
        if kind == "timestamp":
            return TimestampWatermark(parse_timestamp(text))
        if kind == "multi_long":
            values = json.loads(text) if text.strip().startswith("[") else text.split(",")
            return MultiLongWatermark(tuple(int(v) for v in values))
        if kind == "file":
            when, _, path = text.partition("|")
            mtime = (
                int(when)
                if when.strip().isdigit()
                else int(parse_timestamp(when).replace(tzinfo=timezone.utc).timestamp() * 1000)
            )
            return FileWatermark(mtime, path)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"`{text}` is not a {kind} watermark: {exc}", key=key) from exc
    raise ConfigError(f"unknown watermark kind `{kind}`; use one of: {', '.join(KINDS)}", key=key)


def parse_timestamp(text: str) -> datetime:
    """An ISO-8601 date or timestamp, as naive UTC (an offset, if given, is converted)."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value
