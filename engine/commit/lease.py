"""One run at a time per job: a lease file with an expiry, renewed while the run lives.

Leases live in ``<warehouse>/_engine/leases/<job>/<generation>.json``, on a local disk or an object
store (:mod:`engine.storage.blobs`). Taking the lease creates generation ``g + 1`` exclusively
(``O_EXCL`` on a disk, a conditional put, ``If-None-Match: *``, on S3, GCS and Azure), where ``g`` is
the newest existing generation and is free: expired, or held by a process that no longer exists on
this host (a released lease is deleted). Of two runs racing for the same generation exactly one
creates it, whatever machine each runs on;
the other is refused (exit code 3) with the holder's run id, host and pid. The holder renews its
expiry from a background thread; before publishing, a run checks that no newer generation exists
(a run that stalled past its expiry and lost the lease publishes nothing).

The same lease, held by a run for a place rather than a job, is a *writer lease*
(:func:`writer_lease`): on S3 a Delta table has one writing driver at a time, because Delta's S3
log store commits version ``n`` with a plain put that a second driver can overwrite. A run whose
warehouse is on S3 holds ``<warehouse>/_engine/writer`` (every job writes the ``_engine/`` tables),
and one that writes a Delta table on S3 holds ``<parent>/_engine_writer/<table>``; a second writer is
refused with exit code 3, naming the place and the job that holds it. :class:`Leases` holds several
as one.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import JobBusyError, JobFailedError
from engine.platform.procs import pid_start, process_alive
from engine.storage.blobs import Blobs, blobs

log = logging.getLogger(__name__)

CHECK_MARGIN_SECONDS = 5.0
"""A run checks before publishing that its lease has at least this long left (at most a tenth of
its TTL): a publish that could end after the expiry is not started."""


class Lease:
    def __init__(
        self,
        root: str,
        job: str,
        *,
        run_id: str,
        ttl_seconds: float,
        files: Blobs | None = None,
        place: str | None = None,
    ) -> None:
        self.files = files or blobs(f"{root.rstrip('/')}/leases/{job}")
        self.dir = self.files.where
        self.job = job
        self.place = place
        """The place this run writes alone (a writer lease), or ``None`` for the job's run lease."""
        self.run_id = run_id
        self.ttl = ttl_seconds
        self.generation: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------------------------

    def _generations(self) -> list[int]:
        stems = (name.removesuffix(".json") for name in self.files.names() if name.endswith(".json"))
        return sorted(int(stem) for stem in stems if stem.isdigit())

    def _read(self, generation: int) -> dict[str, Any] | None:
        found = self.files.read(f"{generation}.json")
        if found is None:
            return None
        try:
            return dict(json.loads(found))
        except ValueError:  # being written right now: treat as held
            return {"run_id": "?", "host": "?", "pid": 0, "expires": time.time() + self.ttl}

    def holder(self) -> dict[str, Any] | None:
        """The live holder's record, or ``None`` when the lease is free."""
        gens = self._generations()
        if not gens:
            return None
        found = self._read(gens[-1])
        return found if found is not None and _alive(found) else None

    # -- taking and giving back ------------------------------------------------------------------

    def acquire(self) -> Lease:
        gens = self._generations()
        top = gens[-1] if gens else 0
        held = self.holder()
        if held is not None:
            raise self._busy(held)
        mine = top + 1
        if not self.files.create(f"{mine}.json", json.dumps(self._record()).encode()):
            # another run took this generation a moment ago
            raise self._busy(self.holder() or {"run_id": "?", "host": "?", "pid": "?"})
        rival = self._rival(mine)
        if rival is not None:  # two runs listed before a release and made two generations: both yield
            self.files.delete(f"{mine}.json")
            raise self._busy(rival)
        self.generation = mine
        for old in self._generations():  # earlier generations are history
            if old < mine:
                self.files.delete(f"{old}.json")
        self._thread = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
        self._thread.start()
        log.info("%s: lease generation %d taken by run %s", self._subject, self.generation, self.run_id)
        return self

    def _rival(self, mine: int) -> dict[str, Any] | None:
        """Another run's claim that stands beside generation ``mine``, made a moment ago: a newer
        generation, or an older one still held. (A run that listed the generations, saw the lease
        held, and created the next one after the holder released it, races one that listed after
        the release and created the first one again.)"""
        for gen in self._generations():
            if gen > mine:
                return self._read(gen) or {"run_id": "?", "host": "?", "pid": "?"}
            if gen < mine:
                found = self._read(gen)
                if found is not None and _alive(found):
                    return found
        return None

    def release(self) -> None:
        """Give the lease back: delete this run's generation, and the directories the lease made
        if they are now empty (a run refused for a config error leaves nothing behind)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.generation is None:
            return
        if self._mine():  # (not another run's, made after this one's expired)
            self.files.delete(f"{self.generation}.json")
        self.generation = None
        self.files.tidy(3)

    def still_held(self, margin: float = 0.0) -> bool:
        """This run's generation is there, its own, unexpired (for ``margin`` seconds more), and
        no newer generation is held. (A newer one made while this run's was unexpired yields to
        it and vanishes; one that stands was made after this run stalled past its expiry: then a
        late renewal of this run's record must not make two holders.)"""
        found = self._mine()
        if found is None or float(found.get("expires", 0)) <= time.time() + margin:
            return False
        assert self.generation is not None
        return not any(
            (newer := self._read(g)) is not None and _alive(newer) for g in self._generations() if g > self.generation
        )

    def _mine(self) -> dict[str, Any] | None:
        """This run's generation's record, if it is still this run's."""
        if self.generation is None:
            return None
        found = self._read(self.generation)
        return found if found is not None and found.get("run_id") == self.run_id else None

    def check(self) -> None:
        """Raise if this run lost its lease (it stalled past its expiry and another run took it),
        or is about to: what it does next must end before its expiry."""
        if not self.still_held(margin=min(CHECK_MARGIN_SECONDS, self.ttl / 10)):
            raise JobFailedError(
                f"run {self.run_id} lost the lease of {self._subject} (it stalled past its {self.ttl:.0f}s expiry "
                "and another run took over): nothing more is published by this run"
            )

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- internals -------------------------------------------------------------------------------

    def _record(self) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "job": self.job,
            "run_id": self.run_id,
            "host": socket.gethostname(),
            "pid": pid,
            "pid_start": pid_start(pid),
            "user": os.environ.get("USER", ""),
            "taken": time.time(),
            "expires": time.time() + self.ttl,
        }

    def _write(self, record: dict[str, Any]) -> None:
        assert self.generation is not None
        self.files.write(f"{self.generation}.json", json.dumps(record).encode())  # readers see old or new

    def _renew_loop(self) -> None:
        """Renew the expiry every third of the TTL while held. A failed look or write (the store
        unreachable a moment) is tried again next time; renewal ends when this run's record is
        gone or expired, or a newer generation stands (the run then fails at :meth:`check`)."""
        while not self._stop.wait(max(1.0, self.ttl / 3)):
            try:
                if self.still_held():
                    self._write(self._record())
                    continue
                if self._mine() is None or not self.still_held():  # (looked at twice: a rival's claim is brief)
                    log.error("%s: the lease was taken over by another run", self._subject)
                    return
            except Exception as exc:
                log.warning("%s: the lease could not be renewed this time: %s", self._subject, exc)

    @property
    def _subject(self) -> str:
        return f"job {self.job}" if self.place is None else f"the writer of {self.place}"

    def _busy(self, held: dict[str, Any]) -> JobBusyError:
        left = float(held.get("expires", 0)) - time.time()
        holder = (
            f"run {held.get('run_id')} on host {held.get('host')} (pid {held.get('pid')}) holds its lease "
            f"(expires in {max(0, left):.0f}s unless renewed)"
        )
        if self.place is None:
            what = f"job {self.job} is already running: {holder}"
        else:
            what = (
                f"{self.place} is being written by job {held.get('job', '?')}: {holder}. On S3 a Delta table "
                "has one writing run at a time (Delta's S3 log store does not guard against a second)"
            )
        return JobBusyError(
            f"{what}. Nothing was done. If that run is gone, its lease expires on its own; the lease is at {self.dir}"
        )


WRITER_DIR = "_engine_writer"
"""Beside a Delta table on S3: the writer leases of the tables of its directory."""

SINGLE_WRITER_SCHEMES = ("s3", "s3a", "s3n")
"""Where a Delta table takes one writing driver at a time: Delta's S3 log store. Its stores for
local disks, HDFS, GCS and Azure commit with an atomic primitive and take concurrent writers."""


def single_writer(location: str) -> bool:
    """Whether a Delta table at ``location`` needs a writer lease."""
    head, sep, _ = location.partition("://")
    return bool(sep) and head.lower() in SINGLE_WRITER_SCHEMES


def writer_lease(
    location: str,
    job: str,
    *,
    run_id: str,
    ttl_seconds: float,
    files: Callable[[str], Blobs] = blobs,
    what: str | None = None,
    where: str | None = None,
) -> Lease:
    """The writer lease of the Delta table at ``location``, held by ``job``'s run; ``files`` opens a
    location with the run's credentials, ``what`` names the place in messages (``location`` by
    default), ``where`` keeps the lease (by default :func:`writer_dir`)."""
    where = where or writer_dir(location)
    return Lease(where, job, run_id=run_id, ttl_seconds=ttl_seconds, files=files(where), place=what or location)


def writer_dir(location: str) -> str:
    """Where the writer lease of the table at ``location`` lives: beside it, in
    ``<parent>/_engine_writer/<name>`` (inside it, it would make the table's directory one that
    Delta refuses to create a table in). Every spelling of one table (``s3://`` or ``s3a://``, a
    trailing or doubled ``/``) gives the same place."""
    head, _, rest = location.partition("://")
    scheme = "s3a" if head.lower() in SINGLE_WRITER_SCHEMES else head.lower()
    bucket, _, key = rest.partition("/")
    parent, _, name = posixpath.normpath("/" + key).strip("/").rpartition("/")
    return "/".join(part for part in (f"{scheme}://{bucket}", parent, WRITER_DIR, name or "_root") if part)


class Leases:
    """Several leases held as one: taken in order (one refused gives back those taken), checked
    together, given back in reverse order."""

    def __init__(self, leases: Sequence[Lease]) -> None:
        self.leases = list(leases)

    def acquire(self) -> Leases:
        taken: list[Lease] = []
        try:
            for lease in self.leases:
                taken.append(lease.acquire())
        except BaseException:
            for lease in reversed(taken):
                lease.release()
            raise
        return self

    def release(self) -> None:
        for lease in reversed(self.leases):
            lease.release()

    def check(self) -> None:
        for lease in self.leases:
            lease.check()

    def __enter__(self) -> Leases:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _alive(record: dict[str, Any]) -> bool:
    if float(record.get("expires", 0)) < time.time():
        return False
    if record.get("host") != socket.gethostname():
        return True  # cannot see another host's processes: trust the expiry
    pid = int(record.get("pid") or 0)
    return pid <= 0 or process_alive(pid, record.get("pid_start"))
