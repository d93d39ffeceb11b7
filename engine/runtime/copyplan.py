"""Planning a copy DAG: list the source and the target once, diff each dataset against them and
its manifest (the last run's record, its watermark), and keep what was found in the plan.

A dataset with nothing new is an empty work unit, so an unchanged rerun costs a listing and writes
no commit-log rows. The listings and the manifests read are part of the :class:`CopyPlan`:
``run()`` copies and publishes from them, and nothing is kept on the DAG in between.
"""

from __future__ import annotations

import logging
import posixpath
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.converters.base import first_line
from engine.copy import manifest
from engine.copy.errors import ListingError
from engine.copy.listing import (
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
from engine.platform.gcpause import gc_paused
from engine.runtime.dag import DagPlan
from engine.sources.workunits import Size, WorkUnit
from engine.spec.copy import RecursiveFinderConf
from engine.state.watermarks import ManifestWatermark

if TYPE_CHECKING:
    from engine.copy.listing import _Found
    from engine.runtime.copydag import CopyDag
    from engine.sources.base import PlanContext

log = logging.getLogger("engine.runtime.copydag")  # one logger for the copy DAG's messages, as before its split

_Targets = dict[str, "Future[dict[str, tuple[int, int]]]"]
_Manifests = dict[str, "Future[dict[str, manifest.Entry]]"]


@dataclass
class CopyPlan(DagPlan):
    """A copy DAG's plan: one unit per dataset, with each dataset's listing and last manifest."""

    listings: dict[str, DatasetListing] = field(default_factory=dict)
    """Each dataset's diff: what to copy, keep and delete (or why it cannot be listed)."""
    previous: dict[str, dict[str, manifest.Entry]] = field(default_factory=dict)
    """Each dataset's last manifest, read while planning."""


def plan_copy(dag: CopyDag, ctx: PlanContext) -> CopyPlan:
    """List and diff every dataset of ``dag`` (an open plan of an earlier run is listed anew: what
    it staged is reused file by file)."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{dag.name}-listing") as pool:
        return _Planning(dag, ctx, pool).plan(started)


class _Planning:
    """One planning pass: the source is listed while the targets and manifests are read on
    ``pool`` (the listings overlap their waits on the disks; pyarrow reads without the GIL)."""

    def __init__(self, dag: CopyDag, ctx: PlanContext, pool: ThreadPoolExecutor) -> None:
        self.dag = dag
        self.conf = dag.conf
        self.ctx = ctx
        self.pool = pool
        self.manifests: _Manifests = {}

    def plan(self, started: float) -> CopyPlan:
        dag = self.dag
        whole_target = self._whole_target()
        try:
            found = list_source(dag.source)
        except OSError as exc:  # this DAG fails; the job's other DAGs go on
            whole = Dataset(dag.name, dag.source.path, dag.target.path)
            message = f"cannot list {dag.source.url}: {first_line(exc)}"
            unit = WorkUnit(dataset=dag.name, low=None, high=None)
            return CopyPlan(units=[unit], listings={dag.name: DatasetListing(whole, error=message)})
        datasets = find_datasets(self.conf, dag.name, dag.source, dag.target, found)
        on_targets = {ds.name: self._on_target(ds, whole_target) for ds in datasets}
        for ds in datasets:  # found by listing: read while the targets are listed
            self._read_manifest(ds.name)
        plan = CopyPlan(units=[])
        for ds in datasets:
            plan.units.append(self._diff(ds, found, on_targets[ds.name], plan))
        _log_listed(dag.name, plan, len(found), started)
        return plan

    def _whole_target(self) -> Future[dict[str, tuple[int, int]]] | None:
        """One dataset at the target root: its target listing (and manifest) start at once."""
        if not isinstance(self.conf.datasets, RecursiveFinderConf):
            return None
        whole = self.pool.submit(target_files, self.dag.target, self.dag.target.path)
        self._read_manifest(self.conf.datasets.name or self.dag.name)
        return whole

    def _on_target(
        self, ds: Dataset, whole_target: Future[dict[str, tuple[int, int]]] | None
    ) -> Future[dict[str, tuple[int, int]]]:
        target = self.dag.target
        if whole_target is not None and ds.target == target.path and not ds.file:
            return whole_target
        of_file = output_name(self.conf, posixpath.basename(ds.name)) if ds.file else None
        return self.pool.submit(target_files, target, ds.target, of_file=of_file, unpacked=unpacks(self.conf))

    def _read_manifest(self, name: str) -> None:
        if name in self.ctx.state and name not in self.manifests:
            self.manifests[name] = self.pool.submit(read_manifest, self.dag, self.ctx.state[name].watermark)

    def _diff(
        self, ds: Dataset, found: list[_Found], on_target: Future[dict[str, tuple[int, int]]], plan: CopyPlan
    ) -> WorkUnit:
        """Diff one dataset into ``plan``; its work unit is empty when it has nothing to do."""
        low = self.ctx.state[ds.name].watermark if ds.name in self.ctx.state else None
        try:
            with gc_paused():  # a few objects per file, none cyclic: see gcpause.py
                files, partitions = copyable_files(self.conf, ds, found, self.dag.source.path)
            read = self.manifests.get(ds.name)
            previous = plan.previous[ds.name] = read.result() if read is not None else {}
            listed = on_target.result()
            with gc_paused():
                listing = diff(self.conf, ds, files, partitions, listed, previous, self.dag.options.recipe)
        except (ListingError, OSError) as exc:
            listing = DatasetListing(ds, error=first_line(exc))
        plan.listings[ds.name] = listing
        busy = bool(listing.copy or listing.delete or listing.error or adopted(listing, low))
        return WorkUnit(
            dataset=ds.name,
            low=low,
            high=None if busy else low,
            size=Size(files=len(listing.copy), bytes=listing.bytes_to_copy),
            note="" if busy else "no new or changed files",
            empty=not busy,
        )


def read_manifest(dag: CopyDag, low: object) -> dict[str, manifest.Entry]:
    """The manifest ``low`` (a dataset's watermark) names; empty if it has none or it is unreadable."""
    if not isinstance(low, ManifestWatermark):
        return {}
    try:
        with gc_paused():
            return manifest.read(dag.meta, low.path)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # not found, corrupt, or not a manifest
        log.warning("dag %s: manifest %s unreadable (%s); diffing against the target only", dag.name, low.path, exc)
        return {}


def adopted(listing: DatasetListing, low: object) -> bool:
    """Whether files were found already at the target with no manifest recording them yet."""
    return bool(listing.kept) and not isinstance(low, ManifestWatermark)


def _log_listed(name: str, plan: CopyPlan, found: int, started: float) -> None:
    listings = plan.listings.values()
    log.info(
        "dag %s: listed %d source file(s) in %d dataset(s) in %.2f s: "
        "%d to copy (%d bytes), %d unchanged, %d to delete",
        name,
        found,
        len(plan.units),
        time.monotonic() - started,
        sum(len(x.copy) for x in listings),
        sum(x.bytes_to_copy for x in listings),
        sum(len(x.kept) for x in listings),
        sum(len(x.delete) for x in listings),
    )
