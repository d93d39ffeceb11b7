"""Publishing a copy DAG's run: which file sets go out, in which commit steps, and the result.

Once the files are copied and staged, each file set whose files are all staged and verified is
published: one :class:`~engine.copy.steps.PublishFileSet` step per set, deletions around them,
the per-set events, and each dataset's new manifest as its watermark, all in the DAG's commit
sequence. A failed file set is not published (its staged files are reused by the next run); the
others are, unless ``publish.policy=full`` holds everything back.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.commit.batch import BatchRef, Staged
from engine.commit.steps import CommitStep
from engine.copy import manifest
from engine.copy.copier import COPIED, FAILED, REUSED, Copied
from engine.copy.listing import CopyableFile, DatasetListing
from engine.copy.publishing import fail_shared_outputs, file_sets, in_the_way
from engine.copy.steps import ClearStaging, WriteEvents
from engine.runtime.copyplan import CopyPlan, adopted
from engine.runtime.dag import DagResult, DatasetOutcome
from engine.sources.workunits import Size, WorkUnit
from engine.state.status import Status, dag_outcome
from engine.state.store import utcnow
from engine.state.watermarks import ManifestWatermark

if TYPE_CHECKING:
    from engine.runtime.copydag import CopyDag

log = logging.getLogger("engine.runtime.copydag")  # one logger for the copy DAG's messages, as before its split


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
    """A copy DAG's result: the files it published, its copy metrics and its datasets' new manifests."""

    files_published: int = 0
    """Files in the file sets published this run (of committed datasets and partly failed ones)."""
    copy: CopyMetrics = field(default_factory=CopyMetrics)
    marks: dict[str, str] = field(default_factory=dict)
    """Each dataset's new manifest (a watermark, JSON), set by the commit sequence."""

    @property
    def processed(self) -> int:
        return self.files_published

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "copy": self.copy.as_dict()}


def copy_result(
    name: str, outcomes: list[DatasetOutcome], started: float, metrics: CopyMetrics, *, message: str = ""
) -> CopyResult:
    """A result whose status follows its outcomes: any failed or rolled back dataset makes it
    ``PARTIAL`` if some files were published, else ``FAILED``."""
    return CopyResult(
        name=name,
        status=dag_outcome((o.status for o in outcomes), published=any(o.records for o in outcomes)),
        message=message,
        seconds=time.monotonic() - started,
        datasets=sorted(outcomes, key=lambda o: o.unit.dataset),
        copy=metrics,
    )


class Publication:
    """One run's publish of a copy DAG: built from the plan and the copy results, it collects the
    commit steps, events, manifests and metrics of every dataset, then the result."""

    def __init__(self, dag: CopyDag, plan: CopyPlan, batch: BatchRef, results: dict[str, Copied]) -> None:
        self.dag = dag
        self.plan = plan
        self.batch = batch
        self.results = results
        for listing in plan.listings.values():
            fail_shared_outputs(listing, results)
        self.failures = [c for c in results.values() if c.status == FAILED]
        self.failed_sets = {(c.dataset, c.file_set) for c in self.failures}
        self.errors = [x.error for x in plan.listings.values() if x.error]
        self.hold = dag.spec.publish.policy == "full" and bool(self.failures or self.errors)
        """Under ``publish.policy=full`` one failure holds every file set back."""
        self.outputs: dict[str, set[str]] = {}  # each dataset's copied outputs, gathered once (not per dataset)
        for c in results.values():
            self.outputs.setdefault(c.dataset, set()).update(o for o, _ in c.outputs)
        self.metrics = CopyMetrics()
        self.steps: list[CommitStep] = []
        self.events: list[str] = []
        self.marks: dict[str, str] = {}
        self.now = utcnow()

    def result(self, started: float) -> CopyResult:
        units = {u.dataset: u for u in self.plan.units}
        outcomes = [
            self._dataset(name, listing, unit)
            for name, listing in sorted(self.plan.listings.items())
            if (unit := units.get(name)) is not None
        ]
        self._closing_steps()
        self.metrics.seconds = time.monotonic() - started
        self.metrics.file_sets_failed = len(self.failed_sets)
        first = self.failures[0].error if self.failures else self.errors[0] if self.errors else ""
        result = copy_result(self.dag.name, outcomes, started, self.metrics, message=first)
        published = (Status.COMMITTED, Status.FAILED)
        result.files_published = sum(o.records for o in outcomes if o.status in published)
        result.sinks = {"target": result.files_published}
        result.staged = [Staged(steps=self.steps)] if self.steps else []
        result.marks = self.marks
        return result

    def _dataset(self, name: str, listing: DatasetListing, unit: WorkUnit) -> DatasetOutcome:
        """One dataset's steps, events and manifest, and its outcome."""
        counted = self._count(listing)
        if listing.error:
            log.error("dag %s: dataset %s: %s", self.dag.name, name, listing.error)
            return DatasetOutcome(unit, Status.FAILED, listing.error, start_time=self.now)
        if unit.empty:
            return DatasetOutcome(unit, Status.EMPTY, unit.note, start_time=self.now)
        sets = file_sets(listing)
        later = self._deletions_first(name, listing) if not self.hold else []
        published = self._file_sets(listing, sets)
        if later:  # the rest once the new files are in place: a moved file is never missing
            self.steps.append(self.dag.publisher.deletion(listing, later))
        if not self.hold:
            self._new_manifest(name, listing, unit, published)
        status, message = self._verdict(name)
        copied_bytes = sum(self.results[f.stage_key].bytes_read for f in published if f.stage_key in self.results)
        unit.size = Size(files=len(published), bytes=copied_bytes)
        counted.update(published=len(published), mb=round(copied_bytes / 1e6, 3))
        return DatasetOutcome(unit, status, message, records=len(published), start_time=self.now, end_time=utcnow())

    def _deletions_first(self, name: str, listing: DatasetListing) -> list[str]:
        """Drop deletions of paths this run's copies replace; step the ones in the new files' way
        (a file where a new directory goes, or in a directory a new file replaces) before them.
        The others, returned, go after."""
        copied_here = self.outputs.get(name, set())
        listing.delete = [rel for rel in listing.delete if rel not in copied_here]
        self.metrics.files_deleted += len(listing.delete)
        first, later = in_the_way(listing.delete, copied_here)
        if first:
            self.steps.append(self.dag.publisher.deletion(listing, first))
        return later

    def _file_sets(
        self, listing: DatasetListing, sets: dict[tuple[str, str], list[CopyableFile]]
    ) -> list[CopyableFile]:
        """A publish step and an event for each file set that may go out; its files."""
        published: list[CopyableFile] = []
        for (ds, file_set), files in sorted(sets.items()):
            if (ds, file_set) in self.failed_sets or self.hold:
                continue
            self.steps.append(self.dag.publisher.file_set(listing, file_set, files, self.results))
            published += files
            self.events.append(
                self.dag.publisher.event(listing, file_set, files, self.results, self.batch.number, self.now)
            )
        return published

    def _new_manifest(self, name: str, listing: DatasetListing, unit: WorkUnit, published: list[CopyableFile]) -> None:
        """Write the dataset's next manifest when anything changed; it becomes its watermark."""
        previous = self.plan.previous.get(name, {})
        entries = self.dag.publisher.entries(listing, published, self.results, previous)
        if published or listing.delete or adopted(listing, unit.low):
            path = self.dag.manifest_path(name, self.batch.number)
            manifest.write(self.dag.meta, path, entries)
            total = sum(n for e in entries for _, n in e.outputs)
            self.marks[name] = ManifestWatermark(path, len(entries), total).to_json()

    def _verdict(self, name: str) -> tuple[Status, str]:
        failed = [c for c in self.failures if c.dataset == name]
        if failed:
            return Status.FAILED, f"{len(failed)} file(s) failed, first: {failed[0].error}"
        if self.hold:
            held = len(self.failures) + len(self.errors)
            return (
                Status.ROLLED_BACK,
                f"rolled back: publish.policy=full and {held} file(s) or dataset(s) failed",
            )
        return Status.COMMITTED, ""

    def _closing_steps(self) -> None:
        dag = self.dag
        if self.steps and not self.failed_sets and not self.hold:  # nothing left to reuse: journals and leftovers go
            self.steps.append(ClearStaging(dag.target.url, dag.options.staging, family=dag.staging_family))
        if self.events and dag.spec.events_dir:
            name = f"{dag.job}.{dag.name}.b{self.batch.number:06d}.{dag.run_id}.jsonl"
            self.steps.append(WriteEvents(dag.spec.events_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", name), self.events))

    def _count(self, listing: DatasetListing) -> dict[str, Any]:
        """Add the dataset's file counts to the run's metrics; its own entry of them."""
        m = self.metrics
        mine = [self.results[f.stage_key] for f in listing.copy if f.stage_key in self.results]
        copied = sum(1 for c in mine if c.status == COPIED)
        reused = sum(1 for c in mine if c.status == REUSED)
        failed = sum(1 for c in mine if c.status == FAILED)
        m.files_copied += copied
        m.files_reused += reused
        m.files_failed += failed
        m.files_skipped += len(listing.kept)
        m.bytes += sum(c.bytes_read for c in mine if c.status == COPIED)
        sets = {(listing.dataset.name, f.file_set) for f in listing.copy}
        m.file_sets_published += len(sets - self.failed_sets)
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
