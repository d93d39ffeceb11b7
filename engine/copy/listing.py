"""The copy listing: datasets found below the source root, their copyable files, and the diff
against the target and the last run's manifest. Runs on the driver, one recursive listing of each
root (one call on local disks, a flat listing on object stores); no Spark.

A :class:`CopyableFile` carries what copying one file needs (Gobblin's CopyableFile): the source
status, where it lands, its file set (the unit published atomically) and a guid, the SHA-1 of the
origin path, length and modification time. A file is copied when it is new or changed: its guid
differs from the manifest's (what the last run published) or its published outputs are gone from
the target. Without a manifest entry, a plain copy whose target already holds a file of the same
size, not older than the source, is adopted as it is (the ``cp -u`` rule).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING

from engine.commit.owners import OWNER_FILE
from engine.copy.errors import ListingError
from engine.copy.fs import Listed, Location, list_files
from engine.copy.manifest import Entry
from engine.copy.transforms import renamed
from engine.platform.gcpause import gc_paused
from engine.spec.copy import CopyConf, DatePartitionedFinderConf, GlobFinderConf
from engine.storage.partitions import PartitionLayout

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_OWNER_FILES = (OWNER_FILE, f".{OWNER_FILE}.crc")
"""The owner record and the checksum Hadoop's local file system writes beside it."""
STAGING = "_engine_staging"
"""The directory below the target root where files are staged (never listed, never copied)."""


@dataclass(frozen=True)
class Dataset:
    name: str
    source: str
    """Its root, a path within the source file system."""
    target: str
    """Where it lands, a path within the target file system (a file dataset: the directory its
    file lands in)."""
    file: bool = False
    """A single file matched by a ``glob`` finder: ``source`` is the file itself."""


@dataclass(slots=True)
class CopyableFile:
    """One source file to consider. Treat it as immutable: it is not frozen only because planning
    builds one per source file and a frozen dataclass costs four times as much to construct; it is
    therefore unhashable (key dicts by ``stage_key`` or ``relative``)."""

    dataset: str
    file_set: str
    path: str
    """The source path within the source file system."""
    relative: str
    """Relative to the dataset's source root."""
    size: int
    mtime_ns: int
    target: str
    """Where it lands, relative to the dataset's target root: the file (single output) or the
    directory its archive unpacks into (``""``: beside the archive)."""
    guid: str
    _stage_key: str = field(default="", init=False, repr=False, compare=False)

    @property
    def stage_key(self) -> str:
        """Its staging name: the guid plus where and how it is copied."""
        if not self._stage_key:
            self._stage_key = hashlib.sha1(f"{self.guid}\n{self.target}".encode()).hexdigest()
        return self._stage_key


@dataclass
class DatasetListing:
    dataset: Dataset
    copy: list[CopyableFile] = field(default_factory=list)
    """New or changed files."""
    kept: dict[str, Entry] = field(default_factory=dict)
    """Unchanged files, by source relative path (their manifest entries, carried forward)."""
    delete: list[str] = field(default_factory=list)
    """Target files to delete (relative to the dataset's target root)."""
    source_files: int = 0
    error: str = ""
    """Why this dataset cannot be copied this run (it fails; the others go on)."""

    @property
    def bytes_to_copy(self) -> int:
        return sum(f.size for f in self.copy)


def guid(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha1(f"{path}\n{size}\n{mtime_ns}".encode()).hexdigest()


def glob_regex(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` within one path segment, ``**`` across any depth."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(pattern[i]))
                i += 1
            else:
                out.append(fnmatch.translate(pattern[i : end + 1])[4:-3])
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class Matcher:
    """``include``/``exclude`` globs on paths relative to a dataset (a pattern without ``/``
    matches the base name at any depth)."""

    def __init__(self, include: list[str], exclude: list[str]) -> None:
        self.include = [(glob_regex(p), "/" in p) for p in include]
        self.exclude = [(glob_regex(p), "/" in p) for p in exclude]

    @staticmethod
    def _any(patterns: list[tuple[re.Pattern[str], bool]], rel: str) -> bool:
        if not patterns:
            return False
        base = rel.rsplit("/", 1)[-1]
        return any(rx.match(rel if full else base) for rx, full in patterns)

    def __call__(self, rel: str) -> bool:
        if self.include and not self._any(self.include, rel):
            return False
        return not self._any(self.exclude, rel)

    def excluded(self, rel: str) -> bool:
        return self._any(self.exclude, rel)


# -- partitions ----------------------------------------------------------------------------------


def _window(conf: DatePartitionedFinderConf, today: date) -> date | None:
    starts = []
    if conf.since:
        starts.append(date.fromisoformat(conf.since))
    if conf.lookback_days:
        starts.append(today - timedelta(days=conf.lookback_days - 1))
    return max(starts) if starts else None


# -- the listing ---------------------------------------------------------------------------------


@dataclass
class _Found:
    info: Listed
    rel_root: str
    """Relative to the source root."""


def _relative(root: str, path: str) -> str:
    root = root.rstrip("/")
    if path.rstrip("/") == root:
        return ""
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path.lstrip("/")


def _segments_match(pattern: str, rel: str) -> bool:
    parts, pats = rel.split("/"), pattern.strip("/").split("/")
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, p) for a, p in zip(parts, pats, strict=True))


def list_source(source: Location) -> list[_Found]:
    listed = list_files(source, source.path)
    with gc_paused():
        return [_Found(info, rel) for info, rel in _below(source.path, listed)]


def _below(root: str, listed: list[Listed]) -> Iterator[tuple[Listed, str]]:
    """Each file listed below ``root`` with its path relative to it, staging left out, and the
    record of which job owns a place (:data:`~engine.commit.owners.OWNER_FILE`: the source's, not
    the copy's)."""
    skip = len(root.rstrip("/")) + 1
    for info in listed:
        rel = info.path[skip:] if info.path.startswith(root) else _relative(root, info.path)
        if STAGING in rel and STAGING in rel.split("/"):
            continue
        if rel.rsplit("/", 1)[-1] in _OWNER_FILES:
            continue
        yield info, rel


def find_datasets(conf: CopyConf, dag: str, source: Location, target: Location, found: list[_Found]) -> list[Dataset]:
    """The datasets below the source root (Gobblin's DatasetFinder)."""
    finder = conf.datasets
    if isinstance(finder, GlobFinderConf | DatePartitionedFinderConf):
        depth = finder.pattern.strip("/").count("/") + 1
        match = finder.match if isinstance(finder, GlobFinderConf) else "directories"
        roots: set[str] = set()
        files: set[str] = set()
        for f in found:
            parts = f.rel_root.split("/")
            if len(parts) < depth:
                continue
            prefix = "/".join(parts[:depth])
            if not _segments_match(finder.pattern, prefix):
                continue
            if len(parts) == depth:  # a file at the pattern's depth
                if match != "directories":
                    files.add(prefix)
            elif match != "files":
                roots.add(prefix)
        datasets = [Dataset(r, source.join(r), target.join(r)) for r in roots]
        for r in files:
            parent = posixpath.dirname(r)
            datasets.append(Dataset(r, source.join(r), target.join(parent) if parent else target.path, file=True))
        return sorted(datasets, key=lambda d: d.name)
    return [Dataset(finder.name or dag, source.path, target.path)]


def _file_set(conf: CopyConf, rel: str, partition: str) -> str:
    if conf.file_set == "file":
        return rel
    if conf.file_set == "directory":
        return posixpath.dirname(rel) or "."
    if conf.file_set == "partition":
        return partition
    return ""


def copyable_files(
    conf: CopyConf, dataset: Dataset, found: list[_Found], source_root: str, *, today: date | None = None
) -> tuple[list[CopyableFile], set[str] | None]:
    """The dataset's files after ``include``/``exclude`` (and the date window), and for
    date-partitioned datasets the partitions considered (``None``: all of the dataset)."""
    matcher = Matcher(conf.include, conf.exclude)
    prefix = _relative(source_root, dataset.source)
    layout, start = _date_window(conf, today)
    partitions: set[str] | None = set() if layout else None
    outside = 0
    name, filtering, renaming = dataset.name, bool(conf.include or conf.exclude), bool(conf.transforms)
    by_set = conf.file_set not in ("dataset", None)
    out = []
    for f in found:
        if dataset.file:
            if f.rel_root != prefix:
                continue
            rel = posixpath.basename(prefix)  # relative to the directory it lands in
        elif prefix and not f.rel_root.startswith(prefix + "/"):
            continue
        else:
            rel = f.rel_root[len(prefix) + 1 :] if prefix else f.rel_root
        partition = ""
        if layout is not None:
            parts = rel.split("/")
            partition = "/".join(parts[: layout.depth])
            day = layout.day(partition) if len(parts) > layout.depth else None
            if day is None or (start is not None and day < start):
                outside += 1
                continue
            assert partitions is not None
            partitions.add(partition)
        if filtering and not matcher(rel):
            continue
        path, size, mtime_ns = f.info
        out.append(
            CopyableFile(  # positional (cheaper): the field order above
                name,
                _file_set(conf, rel, partition) if by_set else "",
                path,
                rel,
                size,
                mtime_ns,
                output_name(conf, rel) if renaming else rel,
                guid(path, size, mtime_ns),
            )
        )
    if outside:
        log.info("dataset %s: %d file(s) outside a partition or the date window were not considered", name, outside)
    return out, partitions


def _date_window(conf: CopyConf, today: date | None) -> tuple[PartitionLayout | None, date | None]:
    """A date-partitioned dataset's partition layout and the first day its window takes (``None``:
    no limit); ``(None, None)`` for other datasets."""
    finder = conf.datasets
    if not isinstance(finder, DatePartitionedFinderConf):
        return None, None
    return PartitionLayout(finder.layout), _window(finder, today or datetime.now(timezone.utc).date())


def output_name(conf: CopyConf, rel: str) -> str:
    if not conf.transforms:
        return rel
    directory, name = posixpath.split(rel)
    out = renamed(name, conf.transforms)
    return posixpath.join(directory, out) if out else directory


def unpacks(conf: CopyConf) -> bool:
    return any(t.type in ("untar", "unzip") for t in conf.transforms)


def diff(
    conf: CopyConf,
    dataset: Dataset,
    files: list[CopyableFile],
    partitions: set[str] | None,
    target_files: dict[str, tuple[int, int]],
    manifest: dict[str, Entry],
    made: str = "",
) -> DatasetListing:
    """What to copy, keep and delete for one dataset. ``target_files``: the dataset's target
    files (relative path -> size, modification time in ns); ``manifest``: the last run's entries;
    ``made``: how copies are made now (an entry made otherwise is copied again; an adopted one,
    made by someone else, is not)."""
    listing = DatasetListing(dataset, source_files=len(files))
    plain = not conf.transforms
    _refuse_shared_outputs(dataset, files, unpacks(conf))
    for f in files:
        entry = manifest.get(f.relative)
        if (
            entry is not None
            and entry.guid == f.guid
            and (not entry.made or not made or entry.made == made)
            and all(target_files.get(o, (-1,))[0] == n for o, n in entry.outputs)
        ):
            listing.kept[f.relative] = entry
            continue
        if entry is None and plain:
            found = target_files.get(f.target)
            if found is not None and found[0] == f.size and found[1] >= f.mtime_ns:
                listing.kept[f.relative] = Entry(f.relative, f.guid, f.size, f.mtime_ns, [(f.target, f.size)])
                continue
        listing.copy.append(f)
    if conf.delete.enabled:
        listing.delete = _deletions(conf, listing, files, partitions, target_files, manifest)
    return listing


def _refuse_shared_outputs(dataset: Dataset, files: list[CopyableFile], unpacking: bool) -> None:
    """Two source files that would land on one target path (``x.csv`` and ``x.csv.gz`` with
    gunzip) make a job that flip-flops between them: refuse the dataset, naming both. Archive
    members are only known once unpacked (checked after the copy)."""
    if unpacking:
        return
    seen: dict[str, str] = {}
    for f in files:
        other = seen.setdefault(f.target, f.relative)
        if other != f.relative:
            raise ListingError(
                f"dataset `{dataset.name}`: {other} and {f.relative} would both be copied to {f.target}; "
                "exclude one of them (`copy.exclude`) or copy them with different transforms in separate DAGs"
            )


def _deletions(
    conf: CopyConf,
    listing: DatasetListing,
    files: list[CopyableFile],
    partitions: set[str] | None,
    target_files: dict[str, tuple[int, int]],
    manifest: dict[str, Entry],
) -> list[str]:
    expected = {o for e in listing.kept.values() for o, _ in e.outputs}
    expected |= {f.target for f in listing.copy}
    expected |= {o for f in listing.copy if (e := manifest.get(f.relative)) for o, _ in e.outputs}
    owned = [f.target + "/" for f in files if f.target] if unpacks(conf) else []
    layout = PartitionLayout(conf.datasets.layout) if isinstance(conf.datasets, DatePartitionedFinderConf) else None
    keep_excluded = Matcher([], [] if conf.delete.excluded else conf.exclude)
    gone = []
    for rel in sorted(target_files):
        if rel in expected or any(rel.startswith(p) for p in owned) or keep_excluded.excluded(rel):
            continue
        if layout is not None and partitions is not None:
            partition = "/".join(rel.split("/")[: layout.depth])
            if partition not in partitions and not _in_window(conf, layout, partition):
                continue  # outside the partitions this run considers
        gone.append(rel)
    if not gone:
        return []
    name = listing.dataset.name
    if not files and not conf.delete.allow_empty_source:
        raise ListingError(
            f"dataset `{name}`: its source {listing.dataset.source} is missing or holds no file, which would delete "
            f"all {len(gone)} file(s) at the target; refusing (set `copy.delete.allow_empty_source = true` if "
            "that is meant)"
        )
    limit = conf.delete.max_fraction
    if limit is not None and len(gone) > limit * max(len(target_files), 1):
        raise ListingError(
            f"dataset `{name}`: {len(gone)} of {len(target_files)} target file(s) would be deleted, more than "
            f"`copy.delete.max_fraction` = {limit}; refusing"
        )
    return gone


def _in_window(conf: CopyConf, layout: PartitionLayout, partition: str) -> bool:
    assert isinstance(conf.datasets, DatePartitionedFinderConf)
    day = layout.day(partition)
    start = _window(conf.datasets, datetime.now(timezone.utc).date())
    return day is not None and (start is None or day >= start)


def target_files(
    target: Location, root: str, *, of_file: str | None = None, unpacked: bool = False
) -> dict[str, tuple[int, int]]:
    """The files below a dataset's target root (staging excluded): relative path -> (size, mtime ns).
    ``of_file``: a file dataset's output name, whose siblings (other datasets) are not its files;
    ``unpacked``: its output is the directory an archive unpacks into."""
    listed = list_files(target, root, ordered=False)
    out = {}
    with gc_paused():
        for info, rel in _below(root, listed):
            if of_file is not None and rel != of_file and not (unpacked and rel.startswith(of_file + "/")):
                continue
            out[rel] = (info.size, info.mtime_ns)
    return out
