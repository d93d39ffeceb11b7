"""What reading a range again does to each sink of a DAG, said when ``mode=checkpoint`` moves a
watermark back (``reset``, ``rewind``, or ``set`` to an earlier value).

The engine's exactly-once guarantee is per batch: a range read again is a new batch, so every sink
that appends receives its records a second time. Only a Delta sink with ``mode = merge`` on
``keys`` and the error table (which skips the record ids it holds) take a range again without
duplicates; a sink with ``mode = overwrite`` is left with the re-read range alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.sinks.conf import OnReplay, ReplayEffect, SinkConf

DUPLICATES: ReplayEffect = "DUPLICATES"
REPLACED: ReplayEffect = "REPLACED"
SAFE: ReplayEffect = "SAFE"
SHOWN: ReplayEffect = "SHOWN"
UNKNOWN: ReplayEffect = "UNKNOWN"


@dataclass(frozen=True)
class SinkReplay(OnReplay):
    """One sink's fate when its DAG reads a range again: what its config says, under its name."""

    name: str = field(kw_only=True)
    """``sink `<name>``` or ``error table``."""


def sink_replays(dag: Any) -> list[SinkReplay]:
    """Every sink of ``dag`` (a compiled DAG spec) and its error table, in config order; nothing
    for a copy DAG (it has no sinks: its manifests decide what is copied again). Each sink's
    config says what a replay does to it (:meth:`~engine.sinks.conf.SinkConf.on_replay`)."""
    out = [_sink(s.name, s.conf) for s in getattr(dag, "sinks", ())]
    if dag.error_table:
        out.append(
            SinkReplay(
                f"delta, {dag.error_table}",
                SAFE,
                "a rejected record already in it (same place, record and reasons) is not added again",
                name="error table",
            )
        )
    return out


def _sink(name: str, conf: SinkConf) -> SinkReplay:
    said = conf.on_replay()
    return SinkReplay(said.what, said.effect, said.why, name=f"sink `{name}`")


def summary(replays: list[SinkReplay]) -> dict[str, list[str]]:
    """The sinks by effect, for the run summary."""
    out: dict[str, list[str]] = {}
    for r in replays:
        out.setdefault(r.effect.lower(), []).append(r.name)
    return out


def advice(replays: list[SinkReplay]) -> str:
    """What to do about the sinks that will hold duplicates ("" when none will)."""
    duplicated = [r.name for r in replays if r.effect in (DUPLICATES, UNKNOWN)]
    if not duplicated:
        return ""
    return (
        f"{', '.join(duplicated)} will hold the re-read records twice: delete them there before the next run, "
        "or write that branch with a Delta sink `mode = merge` and `keys`"
    )
