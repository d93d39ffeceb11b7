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
from typing import TYPE_CHECKING

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


def check_owner(fs: HadoopFs, place: str, *, job: str, shared: bool, what: str, key: str) -> Owner | None:
    """Raise :class:`ConfigError` if another job owns ``place`` and the two do not both share it;
    else who owns it (``None``: nobody yet)."""
    owner = owner_of(fs, place)
    if owner is None or owner.job == job or (owner.shared and shared):
        return owner
    if owner.shared:
        why = "it shares the place, this sink does not: set `shared = true` on it too if both are meant to write there"
    else:
        why = (
            "two jobs writing one place put both jobs' records there (each exactly once, so rows of the same "
            "input twice); write another place, or set `shared = true` on both jobs' sinks"
        )
    raise ConfigError(
        f"{what} writes {place}, which job `{owner.job}` writes (recorded in {owner_file(place)} by run "
        f"{owner.run_id or '?'}): {why}",
        key=key,
    )


def claim(fs: HadoopFs, place: str, *, job: str, shared: bool, run_id: str) -> None:
    """Record ``job`` as the owner of ``place`` (which it has just published to) if nobody is, or
    the owner's ``shared`` if it changed; another job's record is left as it is."""
    owner = owner_of(fs, place)
    if owner is not None and (owner.job != job or owner.shared == shared):
        return
    record = Owner(job, shared, run_id, utcnow().isoformat(timespec="seconds"))
    fs.write(owner_file(place), json.dumps(asdict(record)).encode())
