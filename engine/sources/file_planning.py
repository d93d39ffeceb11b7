"""Planning the files source: which listed files each dataset reads this run.

``new_files``: a dataset's watermark is the last file read, by (modification time, path), and the
file log (``_engine/files_read``) holds every file it read. A run reads the files after the
watermark, in that order, plus *late* files: files before it that the log lacks, whatever their
modification time (delivered late by ``rsync -a``, ``cp -p`` or ``distcp -p``). Ties on
modification time are ordered by path, so throttling may stop between two files of the same
second and the next run continues exactly there.

``partitions``: a dataset is a root directory; its date partitions (``pattern``) are read whole,
in time order, once their end is ``delay`` in the past; the watermark is the last partition's
start time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.sources.appended import changed
from engine.sources.base import PlanContext
from engine.sources.conf import FilesSourceConf
from engine.sources.file_listing import FileEntry, bare, first_few, list_files
from engine.sources.workunits import Candidate, Size, WorkUnit, take
from engine.state.errors import FileLogLostError
from engine.state.store import FileKey
from engine.state.watermarks import LAST_PATH, FileWatermark, TimestampWatermark, parse_timestamp
from engine.storage.hadoop import HadoopFs
from engine.storage.partitions import PartitionLayout

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Partition:
    dataset: str
    start: datetime
    files: tuple[FileEntry, ...]


@dataclass(frozen=True)
class _PartitionWindow:
    """Which partition starts a run may read: ended ``delay`` ago, not before ``start`` (first
    run), inside the backfill range ``[lo, hi)``."""

    ready_before: datetime
    first: datetime
    lo: datetime
    hi: datetime


class FilePlanner:
    """One run's work units of a files source, from what was listed and the stored state."""

    def __init__(self, conf: FilesSourceConf, *, key: str) -> None:
        self.conf = conf
        self.key = key

    def plan(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        if self.conf.incremental == "partitions":
            return self._plan_partitions(spark, ctx)
        files = self._list(spark)
        if self.conf.incremental == "none":
            return self._plan_everything(files)
        return self._plan_new_files(files, ctx, HadoopFs(spark))

    def _list(self, spark: SparkSession) -> list[FileEntry]:
        """Every visible file under the paths (:func:`~engine.sources.file_listing.list_files`)."""
        fs = HadoopFs(spark)
        patterns = [p for p in self.conf.paths() if fs.matches(p)]  # a glob matching nothing yet is no data
        single = f"files:{self.conf.paths()[0]}" if self.conf.datasets == "single" else None
        found: dict[str, FileEntry] = {}
        for path, size, mtime in list_files(spark, patterns, key=f"{self.key}.path"):
            dataset = single or f"files:{path.rsplit('/', 1)[0]}"
            found[path] = FileEntry(path=path, size=size, mtime_ms=mtime, dataset=dataset)
        return list(found.values())

    def _plan_everything(self, files: list[FileEntry]) -> list[WorkUnit]:
        by_dataset = _group(files)
        return [
            WorkUnit(dataset=d, low=None, high=None, size=_size(fs), payload=fs) for d, fs in sorted(by_dataset.items())
        ]

    # -- new files -----------------------------------------------------------------------------

    def _plan_new_files(self, files: list[FileEntry], ctx: PlanContext, fs: HadoopFs) -> list[WorkUnit]:
        now_ms = int(ctx.now.replace(tzinfo=timezone.utc).timestamp() * 1000)
        cutoff = now_ms - int(float(self.conf.min_age) * 1000)
        start, end = self._range_ms()
        self._say_future(files, now_ms)
        by_dataset = _group(files)
        known = set(by_dataset) | set(ctx.state)
        lows = {d: self._file_low(d, ctx) for d in known}
        candidates, said = self._new_file_candidates(by_dataset, lows, ctx, (cutoff, start, end), fs)
        chosen = take(candidates, _file_size, per_dataset=ctx.per_dataset, per_run=ctx.per_run, guarantee=ctx.guarantee)
        units = []
        for cand in candidates:
            low = lows[cand.dataset]
            picked, throttled = chosen[cand.dataset]
            if not picked:
                units.append(WorkUnit.carry(cand.dataset, low, "throttled" if throttled else "no new files"))
                continue
            late = sum(1 for f in picked if low is not None and f.position <= low.position and not f.offset)
            changes = [said[f.path] for f in picked if f.path in said]
            note = "; ".join([f"{late} late file(s)"] * bool(late) + changes)
            if throttled:
                note = ", ".join(n for n in (note, f"throttled: {len(picked)} of {len(cand.items)} files") if n)
            high = _advance(low, picked, self._lookback_ms)
            units.append(WorkUnit(cand.dataset, low, high, size=_size(picked), payload=picked, note=note))
        return units

    def _say_future(self, files: list[FileEntry], now_ms: int) -> None:
        """Warn of files modified after now (their writer's clock is ahead): none is read before its
        time has passed, which must not go unsaid (issue 74 item 5)."""
        ahead = sorted((f for f in files if f.mtime_ms > now_ms), key=lambda f: f.position)
        if not ahead:
            return
        last = datetime.fromtimestamp(ahead[-1].mtime_ms / 1000, tz=timezone.utc)
        shown = first_few([f.path for f in ahead])
        log.warning(
            "%s.path: %d file(s) modified in the future (up to %s UTC: the clock of what wrote them is "
            "ahead) are not read until that time has passed: %s",
            self.key,
            len(ahead),
            f"{last:%Y-%m-%d %H:%M:%S}",
            shown,
        )

    def _new_file_candidates(
        self,
        by_dataset: dict[str, list[FileEntry]],
        lows: dict[str, FileWatermark | None],
        ctx: PlanContext,
        window: tuple[int, int, int],
        fs: HadoopFs,
    ) -> tuple[list[Candidate[FileEntry]], dict[str, str]]:
        """Each dataset's files not read yet, oldest first: modified at or before the cutoff and
        inside the backfill range (``window``: cutoff, start, end in ms). The file log is read only
        when some dataset has a watermark, and must then hold every such dataset. A file the log
        has under another size is read as :func:`~engine.sources.appended.changed` says (only its
        new bytes, if lines were appended); what it says of each such file, by path."""
        cutoff, start, end = window
        logged = ctx.files_read() if any(low is not None for low in lows.values()) else {}
        for dataset, low in lows.items():
            if low is not None and low.logged and dataset not in logged:
                raise FileLogLostError(
                    key=self.key, dataset=dataset, watermark=low.display(), value=f"{low.mtime_ms}|{low.path}"
                )
        candidates = []
        said: dict[str, str] = {}
        for dataset in sorted(lows):
            read_before = _ReadBefore(lows[dataset], logged.get(dataset, set()), self._lookback_ms)
            eligible = [
                f
                for f in by_dataset.get(dataset, [])
                if f.mtime_ms <= cutoff and start <= f.mtime_ms < end and not read_before(f)
            ]
            before = _last_reads(logged.get(dataset, set()))
            low = lows[dataset]
            for i, f in enumerate(eligible):
                last = before.get(f.path)
                # changed since a read the watermark covers (after a rewind, a read after the new
                # watermark is read again whole: the rewind asked for it)
                if (
                    last is not None
                    and last != (f.mtime_ms, f.size)
                    and low is not None
                    and (last[0], f.path) <= low.position
                ):
                    eligible[i], said[f.path] = changed(fs, self.conf, f, last[1])
            eligible.sort(key=lambda f: f.position)
            candidates.append(Candidate(dataset, eligible, ctx.rank(dataset)))
        return candidates, said

    def _file_low(self, dataset: str, ctx: PlanContext) -> FileWatermark | None:
        low = ctx.low(dataset)
        if low is not None and not isinstance(low, FileWatermark):
            raise ConfigError(
                f"dataset {dataset} has a {low.kind} watermark, not a file one; "
                "reset it with mode=checkpoint checkpoint.action=reset",
                key=f"{self.key}.incremental",
            )
        return low

    @property
    def _lookback_ms(self) -> int:
        return int(float(self.conf.lookback) * 1000)

    def _range_ms(self) -> tuple[int, int]:
        def ms(text: str | None, default: int) -> int:
            if text is None:
                return default
            try:
                return int(parse_timestamp(text).replace(tzinfo=timezone.utc).timestamp() * 1000)
            except ValueError as exc:
                raise ConfigError(f"`{text}` is not a timestamp", key=f"{self.key}.from") from exc

        return ms(self.conf.from_, -(2**62)), ms(self.conf.to, 2**62)

    # -- date partitions -----------------------------------------------------------------------

    def _plan_partitions(self, spark: SparkSession, ctx: PlanContext) -> list[WorkUnit]:
        conf = self.conf.partitions
        assert conf is not None
        window = _PartitionWindow(
            ready_before=ctx.now - timedelta(seconds=float(conf.delay)),
            first=parse_timestamp(conf.start) if conf.start else datetime.min,
            lo=parse_timestamp(self.conf.from_) if self.conf.from_ else datetime.min,
            hi=parse_timestamp(self.conf.to) if self.conf.to else datetime.max,
        )
        layout = PartitionLayout(conf.pattern)
        under = self._files_by_root(spark)
        candidates = [self._partition_candidate(root, files, layout, window, ctx) for root, files in under.items()]
        for dataset in set(ctx.state) - {c.dataset for c in candidates}:
            candidates.append(Candidate(dataset, [], ctx.rank(dataset)))
        chosen = take(
            candidates,
            lambda p: _size(list(p.files)),
            per_dataset=ctx.per_dataset,
            per_run=ctx.per_run,
            guarantee=ctx.guarantee,
        )
        units = []
        for cand in candidates:
            low = ctx.low(cand.dataset)
            picked, throttled = chosen[cand.dataset]
            if not picked:
                units.append(WorkUnit.carry(cand.dataset, low, "throttled" if throttled else "no new partitions"))
                continue
            files = [f for p in picked for f in p.files]
            note = f"partitions {picked[0].start:%Y-%m-%d %H:%M}..{picked[-1].start:%Y-%m-%d %H:%M}"
            high = TimestampWatermark(picked[-1].start)
            units.append(WorkUnit(cand.dataset, low, high, size=_size(files), payload=files, note=note))
        return units

    def _files_by_root(self, spark: SparkSession) -> dict[str, list[tuple[str, int, int]]]:
        """``(path below the root, bytes, mtime ms)`` of the files under each matched root
        directory, sorted by root, from one listing of them all."""
        fs = HadoopFs(spark)
        roots = sorted({r for p in self.conf.paths() for r, is_dir in fs.glob(p) if is_dir})
        under: dict[str, list[tuple[str, int, int]]] = {r: [] for r in roots}
        bare_roots = {bare(r).rstrip("/") + "/": r for r in roots}
        for path, size, mtime in list_files(spark, roots):
            found = bare(path)
            owner = next((r for prefix, r in bare_roots.items() if found.startswith(prefix)), None)
            if owner is not None:
                under[owner].append((found[len(bare(owner).rstrip("/")) + 1 :], size, mtime))
        return under

    def _partition_candidate(
        self,
        root: str,
        files: list[tuple[str, int, int]],
        layout: PartitionLayout,
        window: _PartitionWindow,
        ctx: PlanContext,
    ) -> Candidate[Partition]:
        """The root's partitions that are ready, after its watermark and inside the backfill range."""
        dataset = f"files:{root}"
        low = ctx.low(dataset)
        if low is not None and not isinstance(low, TimestampWatermark):
            raise ConfigError(f"dataset {dataset} has a {low.kind} watermark, not a timestamp one", key=self.key)
        parts: dict[datetime, list[FileEntry]] = {}
        for relative, size, mtime in files:
            start = layout.start_of(relative)
            if start is not None:
                entry = FileEntry(path=f"{root.rstrip('/')}/{relative}", size=size, mtime_ms=mtime, dataset=dataset)
                parts.setdefault(start, []).append(entry)
        eligible = [
            Partition(dataset, s, tuple(fs_))
            for s, fs_ in sorted(parts.items())
            if layout.end_of(s) <= window.ready_before
            and (low is None or s > low.value)
            and (low is not None or s >= window.first)
            and window.lo <= s < window.hi
        ]
        return Candidate(dataset, eligible, ctx.rank(dataset))


class _ReadBefore:
    """Whether a dataset read a file before: the file log has it (same path, modification time
    and size: a file rewritten in place is new), or it lies at or before the watermark's floor.
    Files after the watermark are always new (after a rewind, the log has them and they are read
    again); a file before it that the log lacks is late, whatever its modification time."""

    def __init__(self, low: FileWatermark | None, logged: set[FileKey], lookback_ms: int) -> None:
        self.low = low
        self.logged = logged
        self.floor = _floor(low, lookback_ms) if low is not None else None
        self.recent = set(low.recent) if low is not None else set()

    def __call__(self, f: FileEntry) -> bool:
        if self.low is None or f.position > self.low.position:
            return False
        if self.floor is not None and f.position <= self.floor:
            return True
        return (f.path, f.mtime_ms, f.size) in self.logged or f.path in self.recent


def _floor(low: FileWatermark, lookback_ms: int) -> tuple[int, str] | None:
    """Where late files stop being looked for: a watermark stored before the file log knew only
    the files read within ``lookback`` of it, so anything older counts as read."""
    if low.legacy:
        return (low.mtime_ms - lookback_ms, LAST_PATH)
    return low.floor


def _advance(low: FileWatermark | None, picked: list[FileEntry], lookback_ms: int) -> FileWatermark:
    """The watermark after reading ``picked``: the furthest position, the floor carried (a legacy
    watermark's look-back window becomes one) and a legacy watermark's recent paths with it."""
    furthest = max(f.position for f in picked)
    if low is not None and low.position > furthest:
        furthest = low.position
    floor = _floor(low, lookback_ms) if low is not None else None
    recent = low.recent if low is not None else ()
    return FileWatermark(furthest[0], furthest[1], recent, floor=floor)


def _last_reads(logged: set[FileKey]) -> dict[str, tuple[int, int]]:
    """Each logged path's ``(modification time, size)`` when it was last read (the latest time's)."""
    latest: dict[str, tuple[int, int]] = {}
    for path, mtime, size in logged:
        if path not in latest or (mtime, size) > latest[path]:  # on one time, the longer read is the later
            latest[path] = (mtime, size)
    return latest


def _group(files: list[FileEntry]) -> dict[str, list[FileEntry]]:
    out: dict[str, list[FileEntry]] = {}
    for f in files:
        out.setdefault(f.dataset, []).append(f)
    return out


def _size(files: list[FileEntry]) -> Size:
    return Size(records=None, bytes=sum(f.size - f.offset for f in files), files=len(files))


def _file_size(f: FileEntry) -> Size:
    """What reading ``f`` costs: the bytes after those read before (all of them, for a new file)."""
    return Size(records=None, bytes=f.size - f.offset, files=1)
