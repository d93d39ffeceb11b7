"""A copy job's config: which files of a source file system are replicated where, how their bytes
are transformed, verified and published (Gobblin distcp's semantics, ``seeds/distcp-design.txt``).

A DAG with a ``copy`` block instead of sources and sinks is a copy DAG:

.. code-block:: hocon

    copy {
      source = "s3://landing/events"
      target = "/data/mirror/events"
      source_options { endpoint = "http://127.0.0.1:9000", region = us-east-1 }
      datasets { type = date_partitioned, pattern = "*", layout = "yyyy/MM/dd" }
      transforms = [{ type = gunzip }]
      verify.checksum = sha256
    }
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.sources.conf import parse_bytes
from engine.spec.transforms import TransformConf

if TYPE_CHECKING:
    from engine.plugins.lineage import DatasetName
    from engine.spec.model import PublishConf


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class RecursiveFinderConf(_Strict):
    """The whole source root is one dataset."""

    type: Literal["recursive"] = "recursive"
    name: str | None = None
    """The dataset's name (status rows, events); the DAG's name when unset."""


class GlobFinderConf(_Strict):
    """Each path below the source root matching ``pattern`` is a dataset, named by its path
    relative to the root; it lands at the same relative path under the target."""

    type: Literal["glob"]
    pattern: str
    """A glob relative to the source root (``*`` does not cross ``/``), e.g. ``db/*`` or ``*/tables/*``."""
    match: Literal["directories", "files", "any"] = "directories"
    """What a match must be: a directory (its files are the dataset), a file (the file alone is a
    dataset, published on its own), or either."""


class DatePartitionedFinderConf(_Strict):
    """Date-partitioned streams (Gobblin's StreamDataset): each directory matching ``pattern`` is a
    dataset; below it, each date partition (``layout``) is a file set published on its own."""

    type: Literal["date_partitioned"]
    pattern: str = "*"
    """The streams, a glob relative to the source root."""
    layout: str = "yyyy/MM/dd"
    """The partition directories below a stream: ``yyyy``, ``MM``, ``dd``, ``HH`` and literal text,
    e.g. ``yyyy/MM/dd``, ``dt=yyyy-MM-dd``, ``yyyy/MM/dd/HH``."""
    since: str | None = None
    """Copy only partitions on or after this date (``2026-11-01``)."""
    lookback_days: int | None = Field(default=None, ge=1)
    """Copy only partitions of the last N days (UTC, today included)."""

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: str) -> str:
        if "yyyy" not in value:
            raise ValueError("the layout needs at least `yyyy` (with MM, dd, HH as needed)")
        return value

    @field_validator("since")
    @classmethod
    def _since(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError(f"`{value}` is not a date (YYYY-MM-DD)")
        return value


class VerifyConf(_Strict):
    """What is checked before a file set is published. Size is always checked."""

    checksum: Literal["none", "md5", "sha1", "sha256", "blake2b", "crc32"] = "none"
    """Also compare a checksum: of the source bytes read with the staged copy re-read from the
    target (plain copies), or of the bytes written with the staged copy (transformed files)."""


class DeleteConf(_Strict):
    """Propagating deletions: files at the target that no source file produces any more."""

    enabled: bool = False
    """Delete them (off: the target keeps them)."""
    allow_empty_source: bool = False
    """A dataset whose source root is missing or holds no file is normally refused (it would
    delete the whole target); allow it."""
    max_fraction: float | None = Field(default=None, gt=0, le=1)
    """Refuse to delete more than this fraction of a dataset's target files in one run."""
    excluded: bool = False
    """Also delete target files that match ``exclude`` (off: they are kept, as rsync keeps
    excluded files without ``--delete-excluded``)."""


class PreserveConf(_Strict):
    """Source attributes kept on the copies (local targets)."""

    mtime: bool = False
    """The source's modification time (archive members: theirs)."""
    permissions: bool = False
    """The source's permission bits (when ``attributes.permissions`` is unset)."""


class AttributesConf(_Strict):
    """Attributes of new files and of the directories a publish creates (local targets)."""

    owner: str | None = None
    """A user name or uid."""
    group: str | None = None
    """A group name or gid."""
    permissions: str | None = None
    """Octal, e.g. ``"0644"``."""
    directory_permissions: str | None = None
    """Octal, e.g. ``"0755"``; for directories created by the copy."""

    @field_validator("permissions", "directory_permissions")
    @classmethod
    def _octal(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"0?[0-7]{3,4}", str(value)):
            raise ValueError(f'`{value}` is not an octal mode (e.g. "0644")')
        return value


class SplitConf(_Strict):
    """Large plain copies split into block ranges copied by parallel tasks (local targets)."""

    enabled: bool = False
    block_size: int | str = "128m"
    """Each block's size."""
    min_size: int | str = "256m"
    """Files at least this large are split."""

    @field_validator("block_size", "min_size")
    @classmethod
    def _bytes(cls, value: int | str) -> int:
        size = parse_bytes(value)
        assert size is not None
        if size < 1 << 20:
            raise ValueError("at least 1m")
        return size


class TasksConf(_Strict):
    """How files are packed into Spark tasks: balanced by size, many small files per task."""

    target_bytes: int | str = "256m"
    """About this many bytes per task (a larger file gets a task of its own)."""
    max_files: int = Field(default=2000, ge=1)
    """At most this many files per task."""
    min_tasks: int | None = Field(default=None, ge=1)
    """At least this many tasks when there are that many files (default: the cores Spark has)."""
    buffer_size: int | str = "1m"
    """The fixed buffer bytes stream through."""

    @field_validator("target_bytes", "buffer_size")
    @classmethod
    def _bytes(cls, value: int | str) -> int:
        size = parse_bytes(value)
        assert size is not None and size > 0
        return size


class EventsConf(_Strict):
    """A JSON line per published file set, for downstream jobs to wait for."""

    enabled: bool = True
    path: str | None = None
    """The directory of event files (one per published batch); ``<warehouse>/_engine/copy_events/<job>``
    when unset."""


class CopyConf(_Strict):
    """A copy DAG: replicate the datasets found below ``source`` to ``target``."""

    source: str
    """The source root: a local path (relative to the job file) or a file-system URL (``s3://``, ``hdfs://``, ...)."""
    target: str
    """The target root, likewise."""
    source_options: dict[str, Any] = Field(default_factory=dict)
    """File-system options of the source (S3: ``endpoint``, ``region``, ``access_key``, ``secret_key``, ...)."""
    target_options: dict[str, Any] = Field(default_factory=dict)
    """File-system options of the target."""
    datasets: RecursiveFinderConf | GlobFinderConf | DatePartitionedFinderConf = Field(
        default=RecursiveFinderConf(), discriminator="type"
    )
    """How datasets are found below the source root."""
    include: list[str] = Field(default_factory=list)
    """Copy only files whose path (relative to their dataset) matches one of these globs (``**`` any depth)."""
    exclude: list[str] = Field(default_factory=list)
    """Skip files whose relative path matches one of these globs."""
    file_set: Literal["dataset", "directory", "file", "partition"] | None = None
    """The unit published atomically: the whole ``dataset``, each ``directory``, each ``file``, or each
    date ``partition`` (the default for date-partitioned datasets; ``dataset`` otherwise)."""
    transforms: list[TransformConf] = Field(default_factory=list)
    """Byte transforms applied in order while copying: gunzip, gzip, decrypt, encrypt, untar, unzip."""
    verify: VerifyConf = VerifyConf()
    delete: DeleteConf = DeleteConf()
    preserve: PreserveConf = PreserveConf()
    attributes: AttributesConf = AttributesConf()
    split: SplitConf = SplitConf()
    tasks: TasksConf = TasksConf()
    events: EventsConf = EventsConf()


@dataclass(frozen=True)
class CopyDagSpec:
    """A compiled copy DAG. It shares the scheduling keys of :class:`~engine.spec.model.DagSpec`."""

    kind: ClassVar[str] = "copy"
    """Which DAG runs it (``engine.runtime.dag.DAG_CLASSES``)."""

    name: str
    key: str
    copy: CopyConf
    """Paths resolved (local ones absolute), ``file_set`` filled in."""
    events_dir: str | None
    manifests_dir: str
    """Where each dataset's record of published files is kept (``<warehouse>/_engine/copy_manifests/<job>``)."""
    publish: PublishConf
    priority: int = 0
    after: tuple[str, ...] = ()
    pool: str | None = None
    dataset: str | None = None
    error_table: None = None
    """Copy DAGs have no error table (a failed file is a failed file set, with its message)."""

    @property
    def pool_name(self) -> str:
        return self.pool or self.name

    def writes(self) -> list[str]:
        """Its target."""
        return [self.copy.target]

    def delta_tables(self) -> list[str]:
        """None: a copy writes files."""
        return []

    def inputs(self) -> dict[str, str]:
        """Nothing an upstream DAG may create: a copy DAG's source must exist when it is checked."""
        return {}

    def references(self) -> list[DatasetName]:
        """Nothing it reads besides its source."""
        return []
