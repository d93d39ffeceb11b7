"""The commit steps of copy jobs (Gobblin's CopyPublisher), stored in the commit log like any other:

- :class:`PublishFileSet`: move one file set's staged files into place (creating parent
  directories with the configured attributes) and drop their staging markers.
- :class:`DeleteTargetFiles`: propagate deletions at the source.
- :class:`WriteEvents`: one JSON line per published file set, in a file of its own per batch.

Steps store the target's URL, never its options: credentials stay in the job's config and are
looked up in :data:`LOCATIONS` (registered by the copy DAGs of the running job) when a step runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from engine.commit.steps import CommitStep, StepContext, StepError
from engine.copy.fs import Location, resolve

LOCATIONS: dict[str, Location] = {}
"""File systems of the running job's copy DAGs by URL (with their options and credentials)."""


def location(url: str) -> Location:
    found = LOCATIONS.get(url)
    return found if found is not None else resolve(url)


def register(loc: Location) -> None:
    LOCATIONS[loc.url] = loc


def _size(loc: Location, path: str) -> int | None:
    if loc.local:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None
    info = loc.fs.get_file_info(path)
    return None if info.type.name == "NotFound" else int(info.size or 0)


def _exists(loc: Location, path: str) -> bool:
    if loc.local:
        return os.path.lexists(path)
    return bool(loc.fs.get_file_info(path).type.name != "NotFound")


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
        loc = location(self.target)
        keys = {str(k) for k, *_ in self.files}
        return not any(_exists(loc, f"{self.staging}/{k}.json") for k in keys) and all(
            _size(loc, str(dst)) == size for _, _, dst, size in self.files
        )

    def execute(self, ctx: StepContext) -> None:
        loc = location(self.target)
        created: set[str] = set()
        half = len(self.files) // 2
        for i, (key, name, dst, size) in enumerate(self.files):
            if i == half:
                ctx.midway()
            staged = f"{self.staging}/{key}/{name}"
            if _exists(loc, staged):
                self._parents(loc, posixpath.dirname(str(dst)), created)
                if loc.local:
                    os.replace(staged, str(dst))
                else:
                    loc.fs.move(staged, str(dst))
            elif _size(loc, str(dst)) != size:
                raise StepError(
                    f"file set `{self.file_set or self.dataset}`: staged file {staged} is missing and "
                    f"{loc.display(str(dst))} does not hold its {size} bytes"
                )
        keys = sorted({str(k) for k, *_ in self.files})
        if loc.local:
            # Removing a marker or a directory sleeps in the file system; on a busy machine each
            # wake-up also waits for a CPU (20,000 small files on a loaded 2-core VM: 70 s in one
            # thread, 7 s in eight). The waits overlap across threads.
            with ThreadPoolExecutor(max_workers=min(8, len(keys) or 1), thread_name_prefix="unstage") as pool:
                list(pool.map(functools.partial(_unstage, self.staging), keys))
            return
        for key in keys:
            marker = f"{self.staging}/{key}.json"
            if _exists(loc, marker):
                loc.fs.delete_file(marker)
            if loc.fs.get_file_info(f"{self.staging}/{key}").type.name == "Directory":
                loc.fs.delete_dir(f"{self.staging}/{key}")

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


def _unstage(staging: str, key: str) -> None:
    """Remove a published file's marker and its staging directory (local targets): two calls
    when, as usual, the directory is already empty."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(f"{staging}/{key}.json")
    try:
        os.rmdir(f"{staging}/{key}")
    except FileNotFoundError:
        pass
    except OSError:  # not empty: an archive's directories
        shutil.rmtree(f"{staging}/{key}", ignore_errors=True)  # its files were moved out


@dataclass
class DeleteTargetFiles(CommitStep):
    kind: ClassVar[str] = "copy_delete_files"
    target: str
    dataset: str
    paths: list[str]
    """Paths within the target file system."""

    def verify(self, ctx: StepContext) -> bool:
        loc = location(self.target)
        return not any(_exists(loc, p) for p in self.paths)

    def execute(self, ctx: StepContext) -> None:
        loc = location(self.target)
        for i, path in enumerate(self.paths):
            if i == len(self.paths) // 2:
                ctx.midway()
            if _exists(loc, path):
                if loc.local:
                    os.remove(path)
                else:
                    loc.fs.delete_file(path)

    def describe(self) -> str:
        return f"delete {len(self.paths)} file(s) of dataset `{self.dataset}` no longer at the source"


@dataclass
class WriteEvents(CommitStep):
    kind: ClassVar[str] = "copy_write_events"
    directory: str
    name: str
    lines: list[str]

    def verify(self, ctx: StepContext) -> bool:
        loc = location(self.directory)
        return _exists(loc, loc.join(self.name))

    def execute(self, ctx: StepContext) -> None:
        loc = location(self.directory)
        path = loc.join(self.name)
        loc.fs.create_dir(loc.path, recursive=True)
        tmp = loc.join(f".{self.name}.tmp")
        with loc.fs.open_output_stream(tmp, compression=None) as out:
            out.write("".join(line + "\n" for line in self.lines).encode())
        loc.fs.move(tmp, path)

    def describe(self) -> str:
        return f"write {len(self.lines)} file-set event(s) to {self.directory}/{self.name}"
