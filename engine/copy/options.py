"""What copying a file on an executor takes and gives back: the options every file of a copy DAG
shares (:class:`CopyOptions`), one file or block to copy (:class:`CopyItem`) and its outcome
(:class:`Copied`). No Spark here."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from engine.copy.fs import Location
from engine.copy.listing import CopyableFile
from engine.spec.transforms import TransformConf

__all__ = ["COPIED", "FAILED", "LAYOUT", "REUSED", "Copied", "CopyItem", "CopyOptions", "copied"]

REUSED, COPIED, FAILED = "reused", "copied", "failed"
LAYOUT = 2
"""Staging layout version, part of every entry's ``made``: entries of another layout are ignored."""


@dataclass(frozen=True)
class CopyOptions:
    """What every file of a copy DAG shares (shipped once per task)."""

    source: Location
    target: Location
    staging: str
    """Path of the DAG's staging directory within the target file system."""
    chain: tuple[TransformConf, ...] = ()
    checksum: str = "none"
    buffer_size: int = 1 << 20
    permissions: int | None = None
    preserve_permissions: bool = False
    preserve_mtime: bool = False
    uid: int = -1
    gid: int = -1

    @functools.cached_property
    def recipe(self) -> str:
        """How a copy is made besides the source file (whose guid is in the stage key): the
        transforms (an encrypt's recipients, a gzip's level, ...) and the attributes. Recorded in
        the manifest with each published file, so a changed config copies the files again; secrets
        are masked in the dump: a changed passphrase alone goes unnoticed. Computed once: a task
        journals it with every file."""
        made = {
            "chain": [t.model_dump(mode="json") for t in self.chain],
            "attributes": [self.permissions, self.preserve_permissions, self.preserve_mtime],
            "owner": [self.uid, self.gid],
        }
        return hashlib.sha1(json.dumps(made, sort_keys=True).encode()).hexdigest()

    @functools.cached_property
    def made(self) -> str:
        """What a staged file depends on: :attr:`recipe` and the staging layout. A file staged by a
        run that failed is reused only if the next run would stage the same."""
        return hashlib.sha1(f"{LAYOUT}:{self.recipe}".encode()).hexdigest()

    @functools.cached_property
    def unpacks(self) -> bool:
        """An archive is unpacked: a file has many outputs, staged below its own directory."""
        return any(t.type in ("untar", "unzip") for t in self.chain)


@dataclass(frozen=True)
class CopyItem:
    file: CopyableFile
    target_root: str
    """The dataset's target root (within the target file system), for the permission pre-check."""
    block: tuple[int, int, int] | None = None
    """``(index, offset, length)`` of a block of a split file."""
    cleared: bool = False
    """A file at the target stands where this file's directory goes, and this batch deletes it
    before publishing (the writability check lets it be)."""


@dataclass
class Copied:
    key: str
    dataset: str
    file_set: str
    relative: str
    status: str
    outputs: list[tuple[str, int]] = field(default_factory=list)
    """``(path relative to the dataset's target root, size)``."""
    staged: list[tuple[str, int]] = field(default_factory=list)
    """``(name below the file's staging directory, size)`` of each output, in the same order."""
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    error: str = ""
    block: int | None = None


def copied(item: CopyItem, status: str, **kw: Any) -> Copied:
    f = item.file
    return Copied(
        f.stage_key, f.dataset, f.file_set, f.relative, status, block=item.block[0] if item.block else None, **kw
    )
