"""A copy DAG: list -> diff -> copy on executors -> verify -> stage -> publish per file set.

It runs under the JobManager like a :class:`~engine.runtime.jobdag.JobDag` (same planning,
scopes, stop, commit log and status rows). ``plan()`` lists the source and the target once and
diffs each dataset against them and its manifest (the last run's record, its watermark); a
dataset with nothing new is an empty work unit, so an unchanged rerun costs a listing and writes
no commit-log rows. ``run()`` copies the new and changed files on executors (tasks balanced by
size), then publishes each file set whose files are all staged and verified: one
:class:`~engine.copy.steps.PublishFileSet` step per set, deletions, the per-set events, and each
dataset's new manifest as its watermark, all in the DAG's commit sequence. A failed file set is
not published (its staged files are reused by the next run); the others are.
"""

from __future__ import annotations

import grp
import hashlib
import logging
import posixpath
import pwd
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef, Staged
from engine.commit.killpoints import kill_point
from engine.commit.steps import CommitStep
from engine.converters.base import first_line
from engine.copy import manifest
from engine.copy.copier import (
    COPIED,
    FAILED,
    REUSED,
    Copied,
    CopyItem,
    CopyOptions,
    copy_items,
    finish_split,
    reusable,
    staged_entries,
)
from engine.copy.errors import ListingError
from engine.copy.fs import resolve
from engine.copy.listing import (
    STAGING,
    CopyableFile,
    Dataset,
    DatasetListing,
    copyable_files,
    diff,
    find_datasets,
    list_source,
    output_name,
    target_files,
    unpacks,
)
from engine.copy.publishing import Publisher, ancestors, fail_shared_outputs, file_sets, in_the_way
from engine.copy.steps import ClearStaging, WriteEvents, register
from engine.copy.tasks import blocks, pack
from engine.gcpause import gc_paused
from engine.runtime.jobdag import DagPlan, DagResult, DatasetOutcome
from engine.runtime.pyworker import steady_zip_imports
from engine.runtime.scope import DagScope
from engine.runtime.stop import Stop
from engine.sources.base import PlanContext
from engine.sources.conf import SourceLimitsConf
from engine.sources.workunits import Size, WorkUnit
from engine.spec.copy import CopyDagSpec, RecursiveFinderConf
from engine.state.store import LIVE, DatasetStatus, utcnow
from engine.state.watermarks import ManifestWatermark

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class CopyMetrics:
    files_copied: int = 0
    files_reused: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    files_deleted: int = 0
    bytes: int = 0
    file_sets_published: int = 0
    file_sets_failed: int = 0
    seconds: float = 0.0
    by_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        rate = self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0
        out = {k: v for k, v in self.__dict__.items() if k not in ("by_dataset", "seconds")}
        return {**out, "seconds": round(self.seconds, 3), "mb_per_s": round(rate, 1), "datasets": self.by_dataset}


@dataclass
class CopyResult(DagResult):
    copy: CopyMetrics = field(default_factory=CopyMetrics)

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "copy": self.copy.as_dict()}


def _uid(name: str | None) -> int:
    if name is None:
        return -1
    return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid


def _gid(name: str | None) -> int:
    if name is None:
        return -1
    return int(name) if name.isdigit() else grp.getgrnam(name).gr_gid


class CopyDag:
    def __init__(self, spec: CopyDagSpec, *, job: str, run_id: str) -> None:
        self.spec = spec
        self.job = job
        self.run_id = run_id
        conf = spec.copy
        self.conf = conf
        self.source = resolve(conf.source, conf.source_options)
        self.target = resolve(conf.target, conf.target_options)
        register(self.target)
        self.meta = resolve(spec.manifests_dir)
        attrs = conf.attributes
        options = CopyOptions(
            source=self.source,
            target=self.target,
            staging="",
            chain=tuple(conf.transforms),
            checksum=conf.verify.checksum,
            buffer_size=int(conf.tasks.buffer_size),
            permissions=int(attrs.permissions, 8) if attrs.permissions else None,
            preserve_permissions=conf.preserve.permissions,
            preserve_mtime=conf.preserve.mtime,
            uid=_uid(attrs.owner),
            gid=_gid(attrs.group),
        )
        # Staging per recipe: files staged under another config are never mistaken for this one's.
        self.staging_family = staging_name(job, spec.name)
        staging = self.target.join(STAGING, f"{self.staging_family}.{options.recipe[:8]}")
        self.options = replace(options, staging=staging)
        self.publisher = Publisher(
            job,
            spec.name,
            run_id,
            self.target,
            self.options,
            int(attrs.directory_permissions, 8) if attrs.directory_permissions else None,
        )
        self.listings: dict[str, DatasetListing] = {}
        self._previous: dict[str, dict[str, manifest.Entry]] = {}
        """Each dataset's last manifest, read while planning."""
        self._marks: dict[str, str] = {}
        self._stop = Stop()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def scope(self) -> str:
        return LIVE

    @property
    def limits(self) -> SourceLimitsConf:
        return SourceLimitsConf()

    def fingerprint(self) -> str:
        return hashlib.sha256(self.conf.model_dump_json().encode()).hexdigest()[:16]

    def high_marks(self, result: DagResult) -> dict[str, str]:
        """Each dataset's new manifest (its published files), set by the commit sequence."""
        return dict(self._marks)

    def files_read(self, result: DagResult) -> list[list[Any]]:
        """Nothing for the file log: a copy dataset's manifest records what it published."""
        return []

    # -- planning ------------------------------------------------------------------------------

    def plan(
        self,
        spark: SparkSession,
        ctx: PlanContext | None = None,
        *,
        validate_only: bool = False,
        reuse: list[WorkUnit] | None = None,
        inputs_may_not_exist: frozenset[str] = frozenset(),
    ) -> DagPlan | None:
        """List and diff every dataset (an open plan of an earlier run is listed anew: what it
        staged is reused file by file). Validation lists nothing."""
        if validate_only or ctx is None:
            return None
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{self.name}-listing") as pool:
            return self._plan(ctx, pool, started)

    def _plan(self, ctx: PlanContext, pool: ThreadPoolExecutor, started: float) -> DagPlan:
        """List the source while the target is listed too (the two listings overlap their waits
        on the disks), then diff each dataset."""
        whole_target: Future[dict[str, tuple[int, int]]] | None = None
        manifests: dict[str, Future[dict[str, manifest.Entry]]] = {}
        if isinstance(self.conf.datasets, RecursiveFinderConf):  # one dataset, at the target root
            whole_target = pool.submit(target_files, self.target, self.target.path)
            one = self.conf.datasets.name or self.name
            if one in ctx.state:  # read while the trees are listed (pyarrow reads without the GIL)
                manifests[one] = pool.submit(self._manifest, ctx.state[one].watermark)
        try:
            found = list_source(self.source)
        except OSError as exc:  # this DAG fails; the job's other DAGs go on
            whole = Dataset(self.name, self.source.path, self.target.path)
            message = f"cannot list {self.source.url}: {first_line(exc)}"
            self.listings = {self.name: DatasetListing(whole, error=message)}
            return DagPlan(units=[WorkUnit(dataset=self.name, low=None, high=None)], schema=None)
        datasets = find_datasets(self.conf, self.name, self.source, self.target, found)
        on_targets = {
            ds.name: whole_target
            if whole_target is not None and ds.target == self.target.path and not ds.file
            else pool.submit(
                target_files,
                self.target,
                ds.target,
                of_file=output_name(self.conf, posixpath.basename(ds.name)) if ds.file else None,
                unpacked=unpacks(self.conf),
            )
            for ds in datasets
        }
        for ds in datasets:  # found by listing: read while the targets are listed
            if ds.name in ctx.state and ds.name not in manifests:
                manifests[ds.name] = pool.submit(self._manifest, ctx.state[ds.name].watermark)
        units = []
        self.listings = {}
        self._previous = {}
        for ds in datasets:
            low = ctx.state[ds.name].watermark if ds.name in ctx.state else None
            try:
                with gc_paused():  # a few objects per file, none cyclic: see gcpause.py
                    files, partitions = copyable_files(self.conf, ds, found, self.source.path)
                read = manifests.get(ds.name)
                previous = self._previous[ds.name] = read.result() if read is not None else {}
                on_target = on_targets[ds.name].result()
                with gc_paused():
                    listing = diff(self.conf, ds, files, partitions, on_target, previous, self.options.recipe)
            except (ListingError, OSError) as exc:
                listing = DatasetListing(ds, error=first_line(exc))
            self.listings[ds.name] = listing
            busy = bool(listing.copy or listing.delete or listing.error or _adopted(listing, low))
            note = "" if busy else "no new or changed files"
            units.append(
                WorkUnit(
                    dataset=ds.name,
                    low=low,
                    high=None if busy else low,
                    size=Size(files=len(listing.copy), bytes=listing.bytes_to_copy),
                    note=note,
                    empty=not busy,
                )
            )
        log.info(
            "dag %s: listed %d source file(s) in %d dataset(s) in %.2f s: "
            "%d to copy (%d bytes), %d unchanged, %d to delete",
            self.name,
            len(found),
            len(datasets),
            time.monotonic() - started,
            sum(len(x.copy) for x in self.listings.values()),
            sum(x.bytes_to_copy for x in self.listings.values()),
            sum(len(x.kept) for x in self.listings.values()),
            sum(len(x.delete) for x in self.listings.values()),
        )
        return DagPlan(units=units, schema=None)

    def _manifest(self, low: object) -> dict[str, manifest.Entry]:
        if not isinstance(low, ManifestWatermark):
            return {}
        try:
            with gc_paused():
                return manifest.read(self.meta, low.path)
        except (OSError, ValueError, KeyError, TypeError) as exc:  # not found, corrupt, or not a manifest
            log.warning(
                "dag %s: manifest %s unreadable (%s); diffing against the target only", self.name, low.path, exc
            )
            return {}

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        spark: SparkSession,
        plan: DagPlan,
        batch: BatchRef,
        *,
        scope: DagScope | None = None,
        stop: Stop | None = None,
        on_read: Callable[[int], None] = lambda files: None,
    ) -> DagResult:
        started = time.monotonic()
        self._stop = stop or Stop()
        self._marks = {}
        units = {u.dataset: u for u in plan.units}
        items, reused = self._items()
        copied = self._copy(spark, items, on_read) if items else []
        if self._stop.is_set():
            return self.cancelled(plan.units, started)
        kill_point("after_staging", self.name)
        with gc_paused():  # a few objects per file, none cyclic, and no long wait: see gcpause.py
            results = self._by_file(copied, items)
            results.update({c.key: c for c in reused})
            return self._publish(batch, units, results, started)

    def _items(self) -> tuple[list[CopyItem], list[Copied]]:
        """What the executors copy (files, or blocks of split files), and the files an earlier
        run staged that are reused as they are."""
        work = [x for x in self.listings.values() if x.copy and not x.error]
        items: list[CopyItem] = []
        reused: list[Copied] = []
        split = self.conf.split
        entries = staged_entries(self.options) if work else {}  # what earlier runs staged
        with gc_paused():
            for listing in work:
                deleting = set(listing.delete)
                for f in listing.copy:
                    cleared = bool(deleting) and any(a in deleting for a in ancestors(f.target))
                    item = CopyItem(f, listing.dataset.target, cleared=cleared)
                    found = reusable(self.options, item, entries.get(f.stage_key))
                    if found is not None:
                        reused.append(found)
                    elif split.enabled and f.size >= int(split.min_size):
                        items += blocks(f, listing.dataset.target, block_size=int(split.block_size))
                    else:
                        items.append(item)
        if reused:
            log.info("dag %s: %d file(s) staged by an earlier run are reused", self.name, len(reused))
        return items, reused

    def _copy(self, spark: SparkSession, items: list[CopyItem], on_read: Callable[[int], None]) -> list[Copied]:
        sc = spark.sparkContext
        tasks = self.conf.tasks
        bins = pack(
            items,
            target_bytes=int(tasks.target_bytes),
            max_files=tasks.max_files,
            min_tasks=tasks.min_tasks or sc.defaultParallelism,
        )
        total_files = len({i.file.stage_key for i in items})
        total_bytes = sum(i.block[2] if i.block else i.file.size for i in items)
        log.info("dag %s: copying %d file(s), %d bytes, in %d task(s)", self.name, total_files, total_bytes, len(bins))
        files_done = sc.accumulator(0)
        bytes_done = sc.accumulator(0)
        options = self.options

        def task(bin_: Any) -> Any:  # each task gets only its own bin (not every bin in the closure)
            steady_zip_imports()

            def progress(files: int, size: int) -> None:
                files_done.add(files)
                bytes_done.add(size)

            return (done for items in bin_ for done in copy_items(options, items, progress))

        finished = threading.Event()
        watcher = threading.Thread(
            target=self._watch,
            args=(finished, files_done, bytes_done, total_files, total_bytes, on_read),
            name=f"{self.name}-progress",
            daemon=True,
        )
        watcher.start()
        try:
            copied: list[Copied] = sc.parallelize(bins, len(bins)).mapPartitions(task).collect()
        finally:
            finished.set()
            watcher.join()
        kill_point("mid_copy", self.name)  # a copy faster than the progress check still meets it before publishing
        return copied

    def _watch(
        self,
        finished: threading.Event,
        files: Any,
        size: Any,
        total_files: int,
        total_bytes: int,
        on_read: Callable[[int], None],
    ) -> None:
        started = time.monotonic()
        half_seen = False
        last = -1
        while not finished.wait(0.5):
            n, b = int(files.value), int(size.value)
            if n != last:
                last = n
                on_read(n)
                rate = b / 1e6 / max(time.monotonic() - started, 1e-9)
                log.info(
                    "dag %s: %d/%d file(s), %.1f/%.1f MB copied (%.1f MB/s)",
                    self.name,
                    n,
                    total_files,
                    b / 1e6,
                    total_bytes / 1e6,
                    rate,
                )
            if not half_seen and n * 2 >= total_files and n:
                half_seen = True
                kill_point("mid_copy", self.name)

    def _by_file(self, copied: list[Copied], items: list[CopyItem]) -> dict[str, Copied]:
        """One result per file (a split file's blocks joined, its staged copy checked)."""
        files = {i.file.stage_key: i.file for i in items}
        out: dict[str, Copied] = {}
        parts: dict[str, list[Copied]] = {}
        for c in copied:
            if c.block is None:
                out[c.key] = c
            else:
                parts.setdefault(c.key, []).append(c)
        for key, blocks_done in parts.items():
            f = files[key]
            failed = [c for c in blocks_done if c.status == FAILED]
            first = blocks_done[0]
            if failed:
                out[key] = replace(first, status=FAILED, error=failed[0].error, block=None)
                continue
            try:
                outputs = finish_split(self.options, f, len(blocks_done))
            except OSError as exc:
                out[key] = replace(first, status=FAILED, error=first_line(exc), block=None)
                continue
            status = REUSED if all(c.status == REUSED for c in blocks_done) else COPIED
            out[key] = replace(
                first,
                status=status,
                outputs=outputs,
                staged=[("", f.size)],
                bytes_read=sum(c.bytes_read for c in blocks_done),
                bytes_written=sum(c.bytes_written for c in blocks_done),
                block=None,
            )
        return out

    def _publish(
        self, batch: BatchRef, units: dict[str, WorkUnit], results: dict[str, Copied], started: float
    ) -> DagResult:
        metrics = CopyMetrics()
        outcomes: list[DatasetOutcome] = []
        steps: list[CommitStep] = []
        events: list[str] = []
        now = utcnow()
        full = self.spec.publish.policy == "full"
        for listing in self.listings.values():
            fail_shared_outputs(listing, results)
        failures = [c for c in results.values() if c.status == FAILED]
        failed_sets = {(c.dataset, c.file_set) for c in failures}
        errors = [x.error for x in self.listings.values() if x.error]
        hold = full and bool(failures or errors)
        outputs: dict[str, set[str]] = {}  # each dataset's copied outputs, gathered once (not per dataset)
        for c in results.values():
            outputs.setdefault(c.dataset, set()).update(o for o, _ in c.outputs)
        for name, listing in sorted(self.listings.items()):
            unit = units.get(name)
            if unit is None:
                continue
            ds_metrics = self._dataset(listing, results, failed_sets, metrics)
            if listing.error:
                outcomes.append(DatasetOutcome(unit, DatasetStatus.FAILED, listing.error, start_time=now))
                log.error("dag %s: dataset %s: %s", self.name, name, listing.error)
                continue
            if unit.empty:
                outcomes.append(DatasetOutcome(unit, DatasetStatus.EMPTY, unit.note, start_time=now))
                continue
            sets = file_sets(listing)
            published: list[CopyableFile] = []
            later: list[str] = []
            if not hold:
                copied_here = outputs.get(name, set())
                listing.delete = [rel for rel in listing.delete if rel not in copied_here]
                metrics.files_deleted += len(listing.delete)
                first, later = in_the_way(listing.delete, copied_here)
                if first:  # a file where a new directory goes, or in a directory a new file replaces
                    steps.append(self.publisher.deletion(listing, first))
            for (ds, file_set), files in sorted(sets.items()):
                if (ds, file_set) in failed_sets or hold:
                    continue
                steps.append(self.publisher.file_set(listing, file_set, files, results))
                published += files
                events.append(self.publisher.event(listing, file_set, files, results, batch.number, now))
            if later:  # the rest once the new files are in place: a moved file is never missing
                steps.append(self.publisher.deletion(listing, later))
            ds_failed = [c for c in failures if c.dataset == name]
            if not hold:
                entries = self.publisher.entries(listing, published, results, self._previous.get(name, {}))
                if published or listing.delete or _adopted(listing, unit.low):
                    path = self._manifest_path(name, batch.number)
                    manifest.write(self.meta, path, entries)
                    total = sum(n for e in entries for _, n in e.outputs)
                    self._marks[name] = ManifestWatermark(path, len(entries), total).to_json()
            if ds_failed:
                message = f"{len(ds_failed)} file(s) failed, first: {ds_failed[0].error}"
                status = DatasetStatus.FAILED
            elif hold:
                message = (
                    f"rolled back: publish.policy=full and {len(failures) + len(errors)} file(s) or dataset(s) failed"
                )
                status = DatasetStatus.ROLLED_BACK
            else:
                message, status = "", DatasetStatus.COMMITTED
            copied_bytes = sum(results[f.stage_key].bytes_read for f in published if f.stage_key in results)
            unit.size = Size(files=len(published), bytes=copied_bytes)
            outcomes.append(
                DatasetOutcome(unit, status, message, records=len(published), start_time=now, end_time=utcnow())
            )
            ds_metrics.update(published=len(published), mb=round(copied_bytes / 1e6, 3))
        if steps and not failed_sets and not hold:  # nothing left to reuse: journals and leftovers go
            steps.append(ClearStaging(self.target.url, self.options.staging, family=self.staging_family))
        if events and self.spec.events_dir:
            register(resolve(self.spec.events_dir))
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{self.job}.{self.name}.b{batch.number:06d}.{self.run_id}.jsonl")
            steps.append(WriteEvents(self.spec.events_dir, name, events))
        metrics.seconds = time.monotonic() - started
        metrics.file_sets_failed = len(failed_sets)
        published_files = sum(
            o.records for o in outcomes if o.status in (DatasetStatus.COMMITTED, DatasetStatus.FAILED)
        )
        result = self._result(
            outcomes, started, metrics, message=(failures[0].error if failures else errors[0] if errors else "")
        )
        result.records_read = published_files
        result.sinks = {"target": published_files}
        result.staged = [Staged(steps=steps)] if steps else []
        return result

    def _dataset(
        self, listing: DatasetListing, results: dict[str, Copied], failed_sets: set[tuple[str, str]], m: CopyMetrics
    ) -> dict[str, Any]:
        mine = [results[f.stage_key] for f in listing.copy if f.stage_key in results]
        copied = sum(1 for c in mine if c.status == COPIED)
        reused = sum(1 for c in mine if c.status == REUSED)
        failed = sum(1 for c in mine if c.status == FAILED)
        m.files_copied += copied
        m.files_reused += reused
        m.files_failed += failed
        m.files_skipped += len(listing.kept)
        m.bytes += sum(c.bytes_read for c in mine if c.status == COPIED)
        sets = {(listing.dataset.name, f.file_set) for f in listing.copy}
        m.file_sets_published += len(sets - failed_sets)
        entry: dict[str, Any] = {
            "copied": copied,
            "reused": reused,
            "skipped": len(listing.kept),
            "failed": failed,
            "deleted": len(listing.delete),
            "bytes": sum(c.bytes_read for c in mine if c.status == COPIED),
        }
        busy = sum(c.seconds for c in mine if c.status == COPIED)
        entry["mb_per_s"] = round(entry["bytes"] / 1e6 / busy, 1) if busy > 0 else 0.0
        if listing.error:
            entry["error"] = listing.error
        m.by_dataset[listing.dataset.name] = entry
        return entry

    def _manifest_path(self, dataset: str, batch: int) -> str:
        key = hashlib.sha1(dataset.encode()).hexdigest()[:12]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", dataset)[:60]
        run = re.sub(r"[^A-Za-z0-9_.-]", "_", self.run_id)
        return self.meta.join(self.name, f"{safe}-{key}", f"b{batch:06d}-{run}.parquet")

    # -- results -------------------------------------------------------------------------------

    def _result(
        self, outcomes: list[DatasetOutcome], started: float, metrics: CopyMetrics, *, message: str = ""
    ) -> CopyResult:
        failed = [o for o in outcomes if o.status in (DatasetStatus.FAILED, DatasetStatus.ROLLED_BACK)]
        published = any(o.records for o in outcomes)
        status = "SUCCEEDED" if not failed else "PARTIAL" if published else "FAILED"
        return CopyResult(
            name=self.name,
            status=status,
            message=message,
            seconds=time.monotonic() - started,
            datasets=sorted(outcomes, key=lambda o: o.unit.dataset),
            copy=metrics,
        )

    def cancelled(self, units: list[WorkUnit], started: float, reason: str = "") -> DagResult:
        why = f"cancelled: {reason or self._stop.reason}; nothing was published, the next run reuses what was staged"
        outcomes = [DatasetOutcome(u, DatasetStatus.CANCELLED, why) for u in units]
        result = self._result(outcomes, started, CopyMetrics(), message=why)
        result.status = "CANCELLED"
        return result

    def unpublished(self, result: DagResult, message: str) -> DagResult:
        outcomes = [
            replace(o, status=DatasetStatus.FAILED, message=message) if o.status == DatasetStatus.COMMITTED else o
            for o in result.datasets
        ]
        metrics = result.copy if isinstance(result, CopyResult) else CopyMetrics()
        out = self._result(outcomes, time.monotonic() - result.seconds, metrics, message=message)
        out.status = "FAILED"
        return out


def staging_name(job: str, dag: str) -> str:
    """The start of the DAG's directories under ``_engine_staging`` (one per recipe, named
    ``<this>.<recipe digest>``): readable, and unique per (job, DAG) even where sanitising makes
    two names alike (``a.b``+``c`` and ``a``+``b.c``)."""
    digest = hashlib.sha1(f"{job}\0{dag}".encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{job}.{dag}") + f".{digest}"


def _adopted(listing: DatasetListing, low: object) -> bool:
    """Whether files were found already at the target with no manifest recording them yet."""
    return bool(listing.kept) and not isinstance(low, ManifestWatermark)
