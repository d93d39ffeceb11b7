"""Which job owns a place a sink writes: a second job (or flow) writing the same table or folder
is refused unless both say the place is shared.

Two jobs appending to one place each publish their own batches, exactly once each, so the place
holds what both read: three flows on one route once wrote one ``lake/orders`` table, 138 rows
for 45 orders. The compiler refuses two sinks of one job on one place
(:func:`engine.spec.places.check_one_writer`); across jobs, the place itself says who writes it.
The first job to publish there leaves ``_engine_owner`` in it, a small JSON file (the job, whether
it shares the place, the run): readers skip it as they skip any ``_``-prefixed file, Delta's
VACUUM and a file sink's ``overwrite`` leave it alone. Each later run of any job checks it
(:func:`check_owner`, while planning, before anything is read): another job's place is a config
error naming both, unless the owner and this sink both say ``shared = true``.

The file is written after the place's first publish (:func:`claim`), not in the commit
sequence: two jobs whose very first runs publish at the same moment both publish once, and the
next run of the one that lost the claim is refused.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NoReturn

from engine.errors import ConfigError
from engine.state.store import utcnow

if TYPE_CHECKING:
    from engine.storage.hadoop import HadoopFs

log = logging.getLogger(__name__)

OWNER_FILE = "_engine_owner"


@dataclass(frozen=True)
class Owner:
    job: str
    shared: bool = False
    run_id: str = ""
    at: str = ""

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        try:
            data = json.loads(text)
            return cls(
                str(data["job"]), bool(data.get("shared", False)), str(data.get("run_id", "")), str(data.get("at", ""))
            )
        except (ValueError, KeyError, TypeError):
            return None


def owner_file(place: str) -> str:
    return f"{place.rstrip('/')}/{OWNER_FILE}"


def owner_of(fs: HadoopFs, place: str) -> Owner | None:
    """Who owns ``place`` (``None``: nobody has published there yet, or an older engine did)."""
    marker = owner_file(place)
    if fs.size(marker) is None:
        return None
    found = Owner.parse(fs.head(marker, 64 * 1024).decode("utf-8", errors="replace"))
    if found is None:
        log.warning("%s does not say which job owns %s: it is taken as owned by none", marker, place)
    return found


def enclosing(place: str, within: str | None) -> list[str]:
    """The folders between ``within`` (the warehouse; not included) and ``place`` that hold it,
    nearest first: another job's table there holds this sink's files too. None outside ``within``."""
    root, path = (within or "").rstrip("/"), place.rstrip("/")
    if not root or not path.startswith(root + "/"):
        return []
    parts = path[len(root) + 1 :].split("/")[:-1]
    return [f"{root}/{'/'.join(parts[:n])}" for n in range(len(parts), 0, -1)]


def check_owner(
    fs: HadoopFs, place: str, *, job: str, shared: bool, what: str, key: str, within: str | None = None
) -> Owner | None:
    """Raise :class:`ConfigError` if another job owns ``place``, or a folder of ``within`` holding
    it (:func:`enclosing`), and the two do not both share it; else who owns ``place`` (``None``:
    nobody yet)."""
    for outer in enclosing(place, within):
        found = owner_of(fs, outer)
        if found is not None and found.job != job and not (found.shared and shared):
            _refuse(found, outer, writes=f"{place}, inside {outer},", what=what, key=key)
    owner = owner_of(fs, place)
    if owner is None or owner.job == job or (owner.shared and shared):
        return owner
    _refuse(owner, place, writes=f"{place},", what=what, key=key)


def _refuse(owner: Owner, place: str, *, writes: str, what: str, key: str) -> NoReturn:
    if owner.shared:
        why = "it shares the place, this sink does not: set `shared = true` on it too if both are meant to write there"
    else:
        why = (
            "two jobs writing one place put both jobs' records there (each exactly once, so rows of the same "
            "input twice); write another place, or set `shared = true` on both jobs' sinks"
        )
    raise ConfigError(
        f"{what} writes {writes} which job `{owner.job}` writes (recorded in {owner_file(place)} by run "
        f"{owner.run_id or '?'}): {why}",
        key=key,
    )


def claim(fs: HadoopFs, place: str, *, job: str, shared: bool, run_id: str) -> None:
    """Record ``job`` as the owner of ``place`` (which it has just published to) if nobody is, or
    the owner's ``shared`` if it changed; another job's record is left as it is."""
    owner = owner_of(fs, place)
    if owner is not None and (owner.job != job or owner.shared == shared):
        return
    if owner is None and fs.size(owner_file(place)) is not None:
        return  # a record that says no job (warned of): left for the operator, not taken silently
    record = Owner(job, shared, run_id, utcnow().isoformat(timespec="seconds"))
    fs.write(owner_file(place), json.dumps(asdict(record)).encode())
