"""What publishing a copied dataset takes, built on the driver once its files are staged: the
commit steps of its file sets and deletions, the event line of each published set, the dataset's
next manifest, and the refusal of outputs that would land on one path.

Deletions are split around the publishes (:func:`in_the_way`): a target file standing where a new
output or its directory goes is deleted first, every other one after the new files are in place,
so a file moved at the source is never missing at the target.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, replace
from datetime import datetime

from engine.copy.fs import Location
from engine.copy.listing import CopyableFile, DatasetListing
from engine.copy.manifest import Entry
from engine.copy.options import FAILED, Copied, CopyOptions
from engine.copy.steps import DeleteTargetFiles, PublishFileSet


@dataclass(frozen=True)
class Publisher:
    """Builds one copy DAG's publish steps, events and manifests."""

    job: str
    dag: str
    run_id: str
    target: Location
    options: CopyOptions
    directory_mode: int | None = None
    """Mode of the parent directories a publish creates (None: the umask's)."""

    def file_set(
        self, listing: DatasetListing, file_set: str, files: list[CopyableFile], results: dict[str, Copied]
    ) -> PublishFileSet:
        """The step that renames a file set's staged outputs into place."""
        rows: list[list[object]] = []
        for f in files:
            c = results[f.stage_key]
            for (staged, size), (out, _) in zip(c.staged, c.outputs, strict=True):
                rows.append([f.stage_key, staged, posixpath.join(listing.dataset.target, out), size])
        return PublishFileSet(
            target=self.target.url,
            staging=self.options.staging,
            dataset=listing.dataset.name,
            file_set=file_set,
            files=rows,
            directory_mode=self.directory_mode,
            uid=self.options.uid,
            gid=self.options.gid,
        )

    def deletion(self, listing: DatasetListing, rels: list[str]) -> DeleteTargetFiles:
        """The step that deletes ``rels`` (relative to the dataset's target root)."""
        paths = [posixpath.join(listing.dataset.target, rel) for rel in rels]
        return DeleteTargetFiles(self.target.url, listing.dataset.name, paths, root=listing.dataset.target)

    def event(
        self,
        listing: DatasetListing,
        file_set: str,
        files: list[CopyableFile],
        results: dict[str, Copied],
        batch: int,
        now: datetime,
    ) -> str:
        """The JSON line announcing a published file set (naive UTC ``now``)."""
        outputs = [o for f in files for o in results[f.stage_key].outputs]
        return json.dumps(
            {
                "event": "file_set_published",
                "job": self.job,
                "dag": self.dag,
                "dataset": listing.dataset.name,
                "file_set": file_set,
                "files": len(outputs),
                "bytes": sum(n for _, n in outputs),
                "target": self.target.display(listing.dataset.target),
                "run_id": self.run_id,
                "batch": batch,
                "time": now.isoformat() + "Z",
            },
            sort_keys=True,
        )

    def entries(
        self,
        listing: DatasetListing,
        published: list[CopyableFile],
        results: dict[str, Copied],
        previous: dict[str, Entry],
    ) -> list[Entry]:
        """The dataset's next manifest: unchanged files as they were, published ones as made now,
        and a file not published with its last published entry (the target still has it)."""
        entries = dict(listing.kept)
        for f in listing.copy:
            if f.relative in previous:
                entries[f.relative] = previous[f.relative]
        made = self.options.recipe
        for f in published:
            c = results[f.stage_key]
            entries[f.relative] = Entry(f.relative, f.guid, f.size, f.mtime_ns, list(c.outputs), made)
        return list(entries.values())


def file_sets(listing: DatasetListing) -> dict[tuple[str, str], list[CopyableFile]]:
    """The files to copy by ``(dataset, file set)``, the unit published atomically."""
    sets: dict[tuple[str, str], list[CopyableFile]] = {}
    for f in listing.copy:
        sets.setdefault((f.dataset, f.file_set), []).append(f)
    return sets


def in_the_way(deletions: list[str], outputs: set[str]) -> tuple[list[str], list[str]]:
    """Split ``deletions`` into those a publish needs gone first (a file where an output's
    directory goes, or a file under a path an output takes) and the rest."""
    parents = {p for o in outputs for p in ancestors(o)}
    first: list[str] = []
    later: list[str] = []
    for rel in deletions:
        blocking = rel in parents or any(p in outputs for p in ancestors(rel))
        (first if blocking else later).append(rel)
    return first, later


def ancestors(rel: str) -> list[str]:
    """The directories above a relative path, outermost first (``a/b/c`` -> ``a``, ``a/b``)."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def fail_shared_outputs(listing: DatasetListing, results: dict[str, Copied]) -> None:
    """Fail each copied file whose output lands where another file's does (archive members with
    ``into = parent``, or a member named like a plain file): publishing both would let the last
    one win, and the next run would copy the other again, forever."""
    owner: dict[str, str] = {o: e.relative for e in listing.kept.values() for o, _ in e.outputs}
    for f in listing.copy:
        c = results.get(f.stage_key)
        if c is None or c.status == FAILED:
            continue
        clash = next((o for o, _ in c.outputs if owner.get(o, f.relative) != f.relative), None)
        if clash is not None:
            results[f.stage_key] = replace(
                c, status=FAILED, error=f"{f.relative} and {owner[clash]} would both be copied to {clash}"
            )
            continue
        for o, _ in c.outputs:
            owner[o] = f.relative
