"""The commit steps of copy jobs (Gobblin's CopyPublisher), stored in the commit log like any other:

- :class:`PublishFileSet`: move one file set's staged files into place (creating parent
  directories with the configured attributes).
- :class:`ClearStaging`: remove the DAG's staging directory (journals, leftovers) once every
  file set of the batch is published.
- :class:`DeleteTargetFiles`: propagate deletions at the source.
- :class:`WriteEvents`: one JSON line per published file set, in a file of its own per batch.

Steps store the target's URL, never its options: credentials stay in the job's config; the run
passes its copy DAGs' file systems in (:attr:`StepContext.locations
<engine.commit.steps.StepContext.locations>`), and a step looks its URL up there when it runs.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import ClassVar

import pyarrow.fs as pafs

from engine.commit.errors import StepError
from engine.commit.steps import CommitStep, StepContext
from engine.copy.fs import Location, resolve
from engine.copy.staging import staged_file


def location(ctx: StepContext, url: str) -> Location:
    """The file system at ``url`` as the running job's copy DAG opened it (with its options and
    credentials), or as the URL alone opens it."""
    found = ctx.locations.get(url)
    return found if isinstance(found, Location) else resolve(url)


@dataclass
class PublishFileSet(CommitStep):
    kind: ClassVar[str] = "copy_publish_file_set"
    target: str
    """The target root's URL."""
    staging: str
    dataset: str
    file_set: str
    files: list[list[object]]
    """``[stage key, staged name, target path, size]`` of each output."""
    directory_mode: int | None = None
    uid: int = -1
    gid: int = -1

    def verify(self, ctx: StepContext) -> bool:
        loc = location(ctx, self.target)
        return all(
            not loc.files.exists(staged_file(self.staging, str(key), str(name))) and loc.files.size(str(dst)) == size
            for key, name, dst, size in self.files
        )

    def execute(self, ctx: StepContext) -> None:
        loc = location(ctx, self.target)
        created: set[str] = set()
        half = len(self.files) // 2
        members: set[str] = set()
        for i, (key, name, dst, size) in enumerate(self.files):
            if i == half:
                ctx.midway()
            staged = staged_file(self.staging, str(key), str(name))
            if name:
                members.add(str(key))
            if loc.files.exists(staged):
                self._parents(loc, posixpath.dirname(str(dst)), created)
                if loc.object_store and int(str(size)) > COPY_OBJECT_LIMIT:
                    _stream_move(loc, staged, str(dst))
                else:
                    loc.files.rename(staged, str(dst))
            elif loc.files.size(str(dst)) != size:
                raise StepError(
                    f"file set `{self.file_set or self.dataset}`: staged file {staged} is missing and "
                    f"{loc.display(str(dst))} does not hold its {size} bytes"
                )
        for key in sorted(members):  # an archive's emptied member directories
            loc.files.delete(f"{self.staging}/{key}", recursive=True)

    def _parents(self, loc: Location, directory: str, created: set[str]) -> None:
        if directory in created:
            return
        if not loc.local:
            loc.fs.create_dir(directory, recursive=True)
            created.add(directory)
            return
        missing = []
        probe = directory
        while probe and not os.path.isdir(probe):
            missing.append(probe)
            probe = os.path.dirname(probe)
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except FileExistsError:
                continue
            if self.directory_mode is not None:
                os.chmod(d, self.directory_mode)
            if self.uid != -1 or self.gid != -1:
                os.chown(d, self.uid, self.gid)
        created.add(directory)

    def describe(self) -> str:
        which = f"file set `{self.file_set}` of " if self.file_set else ""
        return f"publish {which}dataset `{self.dataset}`: {len(self.files)} file(s) into {self.target}"


COPY_OBJECT_LIMIT = 5 * 1024**3
"""S3's CopyObject (what a move is on an object store) takes at most 5 GiB; larger objects are
streamed into place (a multipart upload) instead."""


def _stream_move(loc: Location, staged: str, dst: str) -> None:
    """Copy ``staged`` to ``dst`` through a stream (multipart upload), check its size, then delete
    the staged object. A crash midway leaves the staged object, so the step is simply redone."""
    size = loc.files.size(staged)
    with (
        loc.fs.open_input_stream(staged, compression=None) as src,
        loc.fs.open_output_stream(dst, compression=None) as out,
    ):
        while chunk := src.read(64 << 20):
            out.write(chunk)
    if loc.files.size(dst) != size:
        raise StepError(f"{loc.display(dst)} does not hold the {size} bytes of {loc.display(staged)} after the copy")
    loc.fs.delete_file(staged)


@dataclass
class ClearStaging(CommitStep):
    kind: ClassVar[str] = "copy_clear_staging"
    target: str
    staging: str
    family: str = ""
    """The DAG's staging directories under other recipes are ``<family>.<8 hex>`` beside it: what
    they hold was staged under a config that no longer applies, so they go too."""

    def _directories(self, loc: Location) -> list[str]:
        found = [self.staging]
        if self.family:
            parent = posixpath.dirname(self.staging)
            pattern = re.compile(re.escape(self.family) + r"\.[0-9a-f]{8}")
            infos = loc.fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True))
            found += [
                i.path
                for i in infos
                if i.type == pafs.FileType.Directory and pattern.fullmatch(posixpath.basename(i.path))
            ]
        return sorted(set(found))

    def verify(self, ctx: StepContext) -> bool:
        loc = location(ctx, self.target)
        if any(loc.files.exists(d) for d in self._directories(loc)):
            return False
        return not loc.files.empty_dir(posixpath.dirname(self.staging))

    def execute(self, ctx: StepContext) -> None:
        loc = location(ctx, self.target)
        for directory in self._directories(loc):
            loc.files.delete(directory, recursive=True)
        # ``_engine_staging`` itself goes once nothing is in it, so a mirror holds exactly what its
        # source holds; while another DAG's (or a failed set's) staged files wait there, it stays.
        # On an object store a file staged between the emptiness check and the deletion would go:
        # the other DAG's publish then finds it missing and fails the set, which its next run copies.
        loc.files.delete_if_empty(posixpath.dirname(self.staging))

    def describe(self) -> str:
        return f"clear the staging directory {self.staging}"


@dataclass
class DeleteTargetFiles(CommitStep):
    kind: ClassVar[str] = "copy_delete_files"
    target: str
    dataset: str
    paths: list[str]
    """Paths within the target file system."""
    root: str = ""
    """The dataset's target root: directories the deletions empty are removed up to it (local
    targets), so a directory deleted at the source can become a file."""

    def verify(self, ctx: StepContext) -> bool:
        loc = location(ctx, self.target)
        if any(loc.files.is_file(p) for p in self.paths):  # a directory there now is a publish's doing
            return False
        if loc.local and self.root:  # and the directories they emptied are gone
            parents = {posixpath.dirname(p) for p in self.paths if posixpath.dirname(p) != self.root.rstrip("/")}
            return not any(os.path.isdir(d) and not os.listdir(d) for d in parents)
        return True

    def execute(self, ctx: StepContext) -> None:
        loc = location(ctx, self.target)
        for i, path in enumerate(self.paths):
            if i == len(self.paths) // 2:
                ctx.midway()
            if loc.files.is_file(path):
                loc.files.delete(path)
        if loc.local and self.root:
            _prune(self.root, {posixpath.dirname(p) for p in self.paths})

    def describe(self) -> str:
        return f"delete {len(self.paths)} file(s) of dataset `{self.dataset}` no longer at the source"


def _prune(root: str, directories: set[str]) -> None:
    """Remove each of ``directories`` and its parents below ``root`` that are empty."""
    for directory in sorted(directories, key=len, reverse=True):
        while directory.startswith(root.rstrip("/") + "/"):
            try:
                os.rmdir(directory)
            except OSError:  # not empty (or gone): its parents are not empty either
                break
            directory = posixpath.dirname(directory)


@dataclass
class WriteEvents(CommitStep):
    kind: ClassVar[str] = "copy_write_events"
    directory: str
    name: str
    lines: list[str]

    def verify(self, ctx: StepContext) -> bool:
        loc = location(ctx, self.directory)
        return loc.files.exists(loc.join(self.name))

    def execute(self, ctx: StepContext) -> None:
        loc = location(ctx, self.directory)
        path = loc.join(self.name)
        loc.fs.create_dir(loc.path, recursive=True)
        tmp = loc.join(f".{self.name}.tmp")
        with loc.fs.open_output_stream(tmp, compression=None) as out:
            out.write("".join(line + "\n" for line in self.lines).encode())
        loc.files.rename(tmp, path)

    def describe(self) -> str:
        return f"write {len(self.lines)} file-set event(s) to {self.directory}/{self.name}"
