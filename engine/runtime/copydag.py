"""A copy DAG: list -> diff -> copy on executors -> verify -> stage -> publish per file set.

It runs under the JobManager like any :class:`~engine.runtime.dag.Dag` (same planning, scopes,
stop, commit log and status rows). ``plan()`` lists and diffs (:mod:`engine.runtime.copyplan`);
``run()`` copies the new and changed files on executors (tasks balanced by size), then builds the
publish of each file set whose files are all staged and verified (:mod:`engine.runtime.copypublish`).
A failed file set is not published (its staged files are reused by the next run); the others are.
"""

from __future__ import annotations

import grp
import hashlib
import logging
import pwd
import re
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef
from engine.commit.killpoints import kill_point
from engine.converters.base import first_line
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
from engine.copy.fs import Location, resolve
from engine.copy.listing import STAGING
from engine.copy.publishing import Publisher, ancestors
from engine.copy.tasks import blocks, pack
from engine.errors import ConfigError
from engine.platform.gcpause import gc_paused
from engine.platform.pyworker import steady_zip_imports
from engine.runtime.copyplan import CopyPlan, plan_copy
from engine.runtime.copypublish import CopyMetrics, CopyResult, Publication, copy_result
from engine.runtime.dag import Connections, Dag, DatasetOutcome
from engine.runtime.scope import DagScope
from engine.runtime.stop import Stop
from engine.sources.base import PlanContext
from engine.sources.workunits import WorkUnit
from engine.spec.copy import CopyConf, CopyDagSpec
from engine.state.status import Status
from engine.state.store import LIVE

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def _options(conf: CopyConf, source: Location, target: Location) -> CopyOptions:
    """How the executors copy each file (staged where :attr:`CopyDag.options` says)."""
    attrs = conf.attributes
    return CopyOptions(
        source=source,
        target=target,
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


def _uid(name: str | None) -> int:
    if name is None:
        return -1
    return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid


def _gid(name: str | None) -> int:
    if name is None:
        return -1
    return int(name) if name.isdigit() else grp.getgrnam(name).gr_gid


class CopyDag(Dag[CopyPlan, CopyResult]):
    """A copy DAG: files replicated from a source file system to a target, file set by file set."""

    def __init__(self, spec: CopyDagSpec, *, job: str, run_id: str, connections: Connections | None = None) -> None:
        super().__init__(spec, job=job, run_id=run_id, connections=connections)
        self.spec: CopyDagSpec = spec
        conf = spec.copy
        self.conf = conf
        # Options given in the job win; else the named connection serving the bucket, if any.
        self.source = resolve(conf.source, conf.source_options or self.connections(conf.source))
        self.target = resolve(conf.target, conf.target_options or self.connections(conf.target))
        self.meta = resolve(spec.manifests_dir, self.connections(spec.manifests_dir))
        self.events = resolve(spec.events_dir, self.connections(spec.events_dir)) if spec.events_dir else None
        attrs = conf.attributes
        options = _options(conf, self.source, self.target)
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

    @property
    def scope(self) -> str:
        """Always live: a copy DAG has no backfill (its manifests say what it published)."""
        return LIVE

    def locations(self) -> dict[str, object]:
        """The target and the events directory, opened with their options and credentials."""
        found = [self.target, *([self.events] if self.events is not None else [])]
        return {loc.url: loc for loc in found}

    def fingerprint(self) -> str:
        return hashlib.sha256(self.conf.model_dump_json().encode()).hexdigest()[:16]

    def high_marks(self, result: CopyResult) -> dict[str, str]:
        """Each dataset's new manifest (its published files), set by the commit sequence."""
        return dict(result.marks)

    # -- planning ------------------------------------------------------------------------------

    def plan(
        self,
        spark: SparkSession,
        ctx: PlanContext,
        *,
        reuse: list[WorkUnit] | None = None,
        references: dict[str, int] | None = None,
    ) -> CopyPlan:
        """List and diff every dataset (an open plan of an earlier run is listed anew: what it
        staged is reused file by file), after refusing a source that is not there (a typo would
        otherwise copy nothing, and with deletes trash the whole target). Validation (the default
        :meth:`~engine.runtime.dag.Dag.validate`) lists nothing and checks no source: an earlier
        hop of a flow, or an upstream DAG, may make it."""
        self._check_source()
        return plan_copy(self, ctx)

    def _check_source(self) -> None:
        """Raise :class:`ConfigError` if the source does not exist (an object store's prefix holding
        no object does not either)."""
        import pyarrow.fs as pafs

        source, conf = self.source, self.spec.copy
        if conf.delete.allow_empty_source:
            return
        if source.fs.get_file_info(source.path).type == pafs.FileType.NotFound:
            raise ConfigError(
                f"the copy source {source.url} does not exist (on an object store: no object is under it yet); "
                "check the path, or set `copy.delete.allow_empty_source = true` if a missing source is meant",
                key=f"{self.spec.key}.copy.source",
            )

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        spark: SparkSession,
        plan: CopyPlan,
        batch: BatchRef,
        *,
        scope: DagScope | None = None,
        stop: Stop | None = None,
        on_read: Callable[[int], None] = lambda files: None,
    ) -> CopyResult:
        started = time.monotonic()
        stop = stop or Stop()
        items, reused = self._items(plan)
        copied = self._copy(spark, items, on_read) if items else []
        if stop.is_set():
            return self.cancelled(plan.units, started, stop.reason)
        kill_point("after_staging", self.name)
        with gc_paused():  # a few objects per file, none cyclic, and no long wait: see gcpause.py
            results = self._by_file(copied, items)
            results.update({c.key: c for c in reused})
            return Publication(self, plan, batch, results).result(started)

    def _items(self, plan: CopyPlan) -> tuple[list[CopyItem], list[Copied]]:
        """What the executors copy (files, or blocks of split files), and the files an earlier
        run staged that are reused as they are."""
        work = [x for x in plan.listings.values() if x.copy and not x.error]
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

    def manifest_path(self, dataset: str, batch: int) -> str:
        """Where ``dataset``'s manifest of ``batch`` is written (one per batch and run)."""
        key = hashlib.sha1(dataset.encode()).hexdigest()[:12]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", dataset)[:60]
        run = re.sub(r"[^A-Za-z0-9_.-]", "_", self.run_id)
        return self.meta.join(self.name, f"{safe}-{key}", f"b{batch:06d}-{run}.parquet")

    # -- results -------------------------------------------------------------------------------

    def cancelled(self, units: list[WorkUnit], started: float, reason: str) -> CopyResult:
        why = f"cancelled: {reason}; nothing was published, the next run reuses what was staged"
        outcomes = [DatasetOutcome(u, Status.CANCELLED, why) for u in units]
        result = copy_result(self.name, outcomes, started, CopyMetrics(), message=why)
        result.status = Status.CANCELLED
        return result

    def unpublished(self, result: CopyResult, message: str) -> CopyResult:
        outcomes = [
            replace(o, status=Status.FAILED, message=message) if o.status == Status.COMMITTED else o
            for o in result.datasets
        ]
        out = copy_result(self.name, outcomes, time.monotonic() - result.seconds, result.copy, message=message)
        out.status = Status.FAILED
        return out


def staging_name(job: str, dag: str) -> str:
    """The start of the DAG's directories under ``_engine_staging`` (one per recipe, named
    ``<this>.<recipe digest>``): readable, and unique per (job, DAG) even where sanitising makes
    two names alike (``a.b``+``c`` and ``a``+``b.c``)."""
    digest = hashlib.sha1(f"{job}\0{dag}".encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{job}.{dag}") + f".{digest}"
