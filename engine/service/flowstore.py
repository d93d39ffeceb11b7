"""Every version of every FlowConfig the service holds, in Delta (``_engine/service/flowconfigs``),
with who made each change and when; and the flows defined as files under ``jobs/flows/``, visible
but read-only.

A change appends the flow's next version. Two changes of one flow at once (two requests, two
instances of the service) are put in order by a lease per flow (:class:`engine.commit.lease.Lease`,
an exclusive create on the store), held while the newest version is read and the next appended:
no version is ever written twice and a create never lands twice.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from engine.commit.lease import Lease
from engine.config.jobs_source import SUFFIXES
from engine.config.templates import read_config
from engine.errors import EngineError, JobBusyError
from engine.service.errors import Conflict, Invalid, NotFound, Unavailable
from engine.service.tables import ServiceTable, utcnow

log = logging.getLogger(__name__)

FLOW_COLUMNS = (
    ("flow_group", "string"),
    ("flow_name", "string"),
    ("version", "long"),
    ("action", "string"),
    ("config", "string"),
    ("changed_by", "string"),
    ("changed_at", "timestamp"),
)
Action = Literal["create", "update", "delete"]
CHANGE_LEASE_SECONDS = 30.0
"""The lease of one change of one flow; a service that died holding it blocks that flow's
changes for at most this long."""
CHANGE_WAIT_SECONDS = 10.0
"""How long a change waits for another change of the same flow to finish before it is refused."""


@dataclass(frozen=True)
class StoredFlow:
    """One version of a flow, as stored, or a flow file (``origin`` ``file``, version 0)."""

    group: str
    name: str
    version: int
    config: dict[str, Any]
    changed_by: str
    changed_at: datetime | None
    origin: Literal["api", "file"] = "api"
    file: str | None = None
    action: str = "create"

    def describe(self) -> dict[str, Any]:
        """Its FlowConfig as the API answers it (secrets are redacted by the caller)."""
        return {
            **self.config,
            "flowGroup": self.group,
            "flowName": self.name,
            "version": self.version,
            "origin": self.origin,
            "changedBy": self.changed_by,
            "changedAt": self.changed_at.isoformat() if self.changed_at else None,
            **({"file": self.file} if self.file else {}),
        }


class FlowStore:
    def __init__(self, root: str, flows_dir: Path) -> None:
        self.root = root
        self.table = ServiceTable(root, "flowconfigs", FLOW_COLUMNS)
        self.files = FlowFiles(flows_dir)
        self._cached: tuple[list[dict[str, Any]], dict[tuple[str, str], StoredFlow]] | None = None

    # -- reading --------------------------------------------------------------------------------

    def get(self, group: str, name: str) -> StoredFlow | None:
        """The flow's newest version (None: never made, or deleted); a flow file otherwise."""
        found = self._newest().get((group, name))
        if found is not None:
            return None if found.action == "delete" else found
        return self.files.get(group, name)

    def listed(self, group: str | None = None) -> list[StoredFlow]:
        """Every live flow (of ``group``), by group and name; flow files too."""
        stored = {k: f for k, f in self._newest().items() if f.action != "delete"}
        files = {(f.group, f.name): f for f in self.files.listed() if (f.group, f.name) not in stored}
        found = [f for f in {**files, **stored}.values() if group is None or f.group == group]
        return sorted(found, key=lambda f: (f.group, f.name))

    def history(self, group: str, name: str) -> list[StoredFlow]:
        """Every version of the flow, oldest first (a flow file's: itself)."""
        versions = sorted(
            (_flow(r) for r in self.table.rows() if r["flow_group"] == group and r["flow_name"] == name),
            key=lambda f: f.version,
        )
        if versions:
            return versions
        found = self.files.get(group, name)
        if found is None:
            raise NotFound(f"no flow {group}/{name}")
        return [found]

    def _newest(self) -> dict[tuple[str, str], StoredFlow]:
        """Each flow's newest version: worked out once per version of the table."""
        rows = self.table.rows()
        cached = self._cached
        if cached is not None and cached[0] is rows:
            return cached[1]
        found: dict[tuple[str, str], StoredFlow] = {}
        for row in rows:
            key = (row["flow_group"], row["flow_name"])
            if key not in found or row["version"] > found[key].version:
                found[key] = _flow(row)
        self._cached = (rows, found)
        return found

    # -- changing -------------------------------------------------------------------------------

    def save(
        self,
        group: str,
        name: str,
        config: dict[str, Any] | None,
        *,
        by: str,
        action: Action,
        seal: Callable[[dict[str, Any] | None], dict[str, Any]] | None = None,
    ) -> StoredFlow:
        """Append the flow's next version (``config`` None: deleted). A create of a flow that
        exists is a :class:`Conflict`, an update or delete of one that does not a :class:`NotFound`;
        a flow file cannot be changed (:class:`Conflict`). ``seal``: makes the config from the
        current version's (its secrets kept), under the lease, so no change in between is lost."""
        if self.files.get(group, name) is not None:
            raise Conflict(
                f"flow {group}/{name} is defined by the file {self.files.get(group, name).file}: "  # type: ignore[union-attr]
                "change the file, or choose another name"
            )
        with self._change_lease(group, name):
            current = self._newest().get((group, name))
            live = current is not None and current.action != "delete"
            if action == "create" and live:
                raise Conflict(f"flow {group}/{name} exists (version {current.version}): update it with PUT")  # type: ignore[union-attr]
            if action != "create" and not live:
                raise NotFound(f"no flow {group}/{name}")
            if seal is not None:
                config = seal(current.config if live else None)  # type: ignore[union-attr]
            row = {
                "flow_group": group,
                "flow_name": name,
                "version": (current.version if current else 0) + 1,
                "action": action,
                "config": json.dumps(config if config is not None else {}),
                "changed_by": by,
                "changed_at": utcnow(),
            }
            self.table.append([row])
            return _flow(row)

    def _change_lease(self, group: str, name: str) -> AbstractContextManager[None]:
        run = f"change-{time.time_ns()}"
        return held(
            Lease(self.root, f"flow.{group}.{name}", run_id=run, ttl_seconds=CHANGE_LEASE_SECONDS), f"{group}/{name}"
        )


@contextmanager
def held(lease: Lease, what: str) -> Iterator[None]:
    """Hold ``lease`` (waiting up to :data:`CHANGE_WAIT_SECONDS` for another holder to give it
    back) while the block runs: a :class:`Conflict` if it stays taken, :class:`Unavailable` if
    the store cannot be reached."""
    deadline = time.monotonic() + CHANGE_WAIT_SECONDS
    while True:
        try:
            lease.acquire()
            break
        except JobBusyError as exc:
            if time.monotonic() > deadline:
                raise Conflict(f"{what} is being changed by another request; try again") from exc
            time.sleep(0.05)
        except (OSError, EngineError) as exc:
            raise Unavailable(f"cannot reach the store to change {what}: {exc}") from exc
    try:
        yield
    finally:
        try:
            lease.release()
        except Exception as exc:  # what the block did is done; the lease expires on its own
            log.warning("could not give back the lease of %s: %s", what, exc)


def _flow(row: dict[str, Any]) -> StoredFlow:
    return StoredFlow(
        group=row["flow_group"],
        name=row["flow_name"],
        version=int(row["version"]),
        config=json.loads(row["config"] or "{}"),
        changed_by=row["changed_by"],
        changed_at=row["changed_at"],
        action=row["action"],
    )


class FlowFiles:
    """The flows defined as files, ``<flows_dir>/<flowGroup>/<flowName>.conf|yaml``: read again
    when a file's modification time changes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[Path, tuple[float, StoredFlow | EngineError]] = {}

    def get(self, group: str, name: str) -> StoredFlow | None:
        for suffix in SUFFIXES:
            path = self.folder / group / f"{name}{suffix}"
            if path.is_file():
                return self._load(path)
        return None

    def has_group(self, group: str) -> bool:
        folder = self.folder / group
        return folder.is_dir() and any(p.suffix in SUFFIXES for p in folder.iterdir())

    def listed(self) -> list[StoredFlow]:
        if not self.folder.is_dir():
            return []
        paths = [p for p in sorted(self.folder.glob("*/*")) if p.suffix in SUFFIXES and p.is_file()]
        return [f for f in (self._load(p, quiet=True) for p in paths) if f is not None]

    def _load(self, path: Path, *, quiet: bool = False) -> StoredFlow | None:
        mtime = path.stat().st_mtime
        cached = self._read.get(path)
        if cached is None or cached[0] != mtime:
            try:
                config: StoredFlow | EngineError = StoredFlow(
                    group=path.parent.name,
                    name=path.stem,
                    version=0,
                    config=read_config(path),
                    changed_by="",
                    changed_at=None,
                    origin="file",
                    file=str(path),
                )
            except EngineError as exc:
                config = exc
            cached = (mtime, config)
            self._read[path] = cached
        if isinstance(cached[1], EngineError):
            if quiet:
                return None
            raise Invalid(f"the flow file {path} cannot be read: {cached[1]}")
        return cached[1]
