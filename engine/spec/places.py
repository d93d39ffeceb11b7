"""Where a job writes and reads, compared as places: the paths the engine reserves for itself, and
which of a DAG's inputs its upstream DAGs create.

A place is ``(scheme, authority, normalised path)`` (:attr:`StoragePath.place`): ``..`` and ``.`` are
folded and relative local paths made absolute, so ``lake/../_engine/state``, an absolute path into the
warehouse and its ``file:`` URL compare equal to what the engine itself uses. Symbolic links are not
followed.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.commit.lease import WRITER_DIR
from engine.errors import ConfigError
from engine.plugins.lineage import shown_url
from engine.spec.copy import CopyDagSpec
from engine.spec.model import AnyDagSpec, DagSpec, JobSpec
from engine.storage.paths import Place, StoragePath

METADATA_DIR = "_engine"
"""Under the warehouse: state, commit log, runs, leases, file log, copy manifests and events."""
STAGING_DIR = "_engine_staging"
"""Below each sink's path and each copy target (``engine.commit.batch``, ``engine.copy.listing``):
batches staged before their commit sequence publishes them."""
DELTA_LOG_DIR = "_delta_log"
"""A Delta table's own log: writing files into it corrupts the table."""
TOMBSTONES_DIR = "_engine_tombstones"
"""Below an ``apply_changes`` sink's path (``engine.commit.apply_changes``): the deletes' tombstones."""
RESERVED_NAMES = (STAGING_DIR, DELTA_LOG_DIR, WRITER_DIR, TOMBSTONES_DIR)


def place(path: str) -> Place:
    """``(scheme, authority, normalised path)`` of a path or URL, for overlap checks."""
    return StoragePath.parse(path).place


def inside(a: Place, b: Place) -> bool:
    """Whether ``a`` lies strictly inside ``b``."""
    return a[:2] == b[:2] and a[2].startswith(b[2].rstrip("/") + "/")


def nested(a: Place, b: Place) -> bool:
    """Whether ``a`` and ``b`` are one place or one lies inside the other."""
    return a == b or inside(a, b) or inside(b, a)


def check_writable(path: str, *, warehouse: str, key: str, file: str | None, what: str) -> None:
    """Refuse a place the engine owns: ``<warehouse>/_engine`` (and anything under it, or a
    directory that holds it: overwriting it would delete the metadata), and any path through a
    staging directory or a Delta log."""
    metadata = place(f"{warehouse.rstrip('/')}/{METADATA_DIR}")
    target = place(path)
    if nested(target, metadata):
        raise ConfigError(
            f"{what} {path} overlaps the engine's metadata ({warehouse.rstrip('/')}/{METADATA_DIR}), "
            "which the engine reserves for itself; choose a path outside it",
            key=key,
            file=file,
        )
    reserved = next((n for n in target[2].split("/") if n in RESERVED_NAMES), None)
    if reserved is not None:
        raise ConfigError(
            f"{what} {path} lies in a `{reserved}` directory, which the engine or Delta reserves; "
            "choose a path outside it",
            key=key,
            file=file,
        )


def upstreams(job: JobSpec, dag: AnyDagSpec) -> list[AnyDagSpec]:
    """The DAGs ``dag`` runs after, directly or through theirs."""
    by_name = {d.name: d for d in job.dags}
    seen: dict[str, AnyDagSpec] = {}
    todo = list(dag.after)
    while todo:
        name = todo.pop()
        if name not in seen and name in by_name:
            seen[name] = by_name[name]
            todo.extend(by_name[name].after)
    return list(seen.values())


def made_upstream(job: JobSpec, dag: AnyDagSpec) -> frozenset[str]:
    """The DAG's input paths (as its source names them) that one of its upstream DAGs writes: a
    Delta table one of them creates, or files in, above or below what one writes (a glob is
    compared by its fixed prefix, so ``/lake/out/*/`` reads what ``/lake/out/a`` holds). Those
    need not exist before the upstreams ran; every other input must, as any DAG's must."""
    reads = dag.inputs() if dag.after else {}
    if not reads:
        return frozenset()
    writes = [place(p) for up in upstreams(job, dag) for p in up.writes()]
    return frozenset(path for path, probe in reads.items() if any(nested(place(probe), w) for w in writes))


@dataclass(frozen=True)
class _Written:
    """A place one of a job's sinks (or copy targets) writes, and the key that names it."""

    what: str
    key: str
    place: Place
    shown: str
    table: bool = False
    """A database table (compared by URL and name), not a path."""
    shared: bool = False
    """The sink says other writers write the place too (``shared = true``)."""
    copy: bool = False
    """A copy target (copy targets among themselves: :func:`engine.spec.compile`'s own check)."""


def check_one_writer(dags: tuple[AnyDagSpec, ...], file: str | None) -> None:
    """Refuse two sinks of a job (of one DAG or two, or a sink and a copy target) that write one
    place: the same path however spelled (``x``, ``x/``, ``./x``, an absolute path into the
    warehouse), one inside the other, or the same database table; unless both sinks say
    ``shared = true`` of the same place (two DAGs appending their own records to one table). Each
    would publish its branch there, so one table would hold the rows twice (two Delta sinks), or a
    folder a Parquet reader reads would hold two writers' files (a Delta table and a Parquet
    extract)."""
    written = [w for d in dags for w in _written_by(d)]
    for i, a in enumerate(written):
        for b in written[i + 1 :]:
            same = a.place == b.place if a.table or b.table else nested(a.place, b.place)
            if not same or (a.copy and b.copy) or (a.shared and b.shared and a.place == b.place):
                continue
            how = "the same place" if a.place == b.place else "nested places (one inside the other)"
            raise ConfigError(
                f"{a.what} (key `{a.key}`: {a.shown}) and {b.what} ({b.shown}) write {how}: each publishes "
                "its records there, so they would be there twice or mixed; give each its own place (or, for two "
                "sinks that append different records to one table, set `shared = true` on both)",
                key=b.key,
                file=file,
            )


def _written_by(dag: AnyDagSpec) -> list[_Written]:
    if isinstance(dag, CopyDagSpec):
        target = dag.copy.target
        return [
            _Written(f"the copy target of `{dag.name}`", f"{dag.key}.copy.target", place(target), target, copy=True)
        ]
    assert isinstance(dag, DagSpec)
    out = []
    for sink in dag.sinks:
        for field, path in sink.conf.writes().items():
            shared = bool(getattr(sink.conf, "shared", False))
            out.append(_Written(f"sink `{sink.name}`", f"{sink.key}.{field}", place(path), path, shared=shared))
        url, table = getattr(sink.conf, "url", None), getattr(sink.conf, "table", None)
        if sink.conf.type == "jdbc" and isinstance(url, str) and isinstance(table, str):
            where = ("jdbc", url.split("?", 1)[0].lower(), table.replace('"', "").lower())  # compared, never shown
            shown = f"{table} at {shown_url(url)}"
            out.append(_Written(f"sink `{sink.name}`", f"{sink.key}.table", where, shown, table=True))
    return out
