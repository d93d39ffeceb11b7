"""Finding the damaged entry of a metadata table's Delta log, once reading the table has failed.

delta-rs and Spark report a bad log entry without naming it ("Kernel error: Json error:
Encountered unexpected 'b' whilst parsing object"). Only after such a failure, this reads what a
reader reads (``_last_checkpoint``, the checkpoint it names, every commit after it) and names the
first entry that does not parse. An entry older than the last checkpoint is never read, so it is
never blamed for a failure it did not cause.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


@dataclass(frozen=True)
class Damage:
    entry: str
    """The damaged file's path."""
    problem: str
    """What is wrong with it, to follow "its log entry <file> ..."."""
    newest: bool
    """Whether it is the newest commit of the log (a write a crash may have cut off)."""


def find_damage(table: str) -> Damage | None:
    """The first unreadable entry of the Delta log of the local table at ``table``, or ``None``."""
    log_dir = os.path.join(table, "_delta_log")
    try:
        names = os.listdir(log_dir)
    except OSError:
        return None
    commits = sorted(int(m.group(1)) for m in map(_COMMIT.match, names) if m)
    newest = commits[-1] if commits else -1
    since = -1
    if "_last_checkpoint" in names:
        path = os.path.join(log_dir, "_last_checkpoint")
        problem = _json_problem(path)
        if problem is not None:
            return Damage(path, problem, newest=False)
        since = _checkpoint_version(path)
        bad = _checkpoint_problem(log_dir, names, since)
        if bad is not None:
            return bad
    for version in (v for v in commits if v > since):
        path = os.path.join(log_dir, f"{version:020d}.json")
        problem = _json_problem(path)
        if problem is not None:
            return Damage(path, problem, newest=version == newest)
    return None


def _json_problem(path: str) -> str | None:
    """Why the JSON-lines file at ``path`` does not parse (``None``: it does)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "is empty"
    for number, line in enumerate(lines, start=1):
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            return f"is not valid JSON (line {number}: {exc})"
        if not isinstance(parsed, dict):
            return f"is not a Delta log entry (line {number} is not a JSON object)"
    return None


def _checkpoint_version(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        version = json.loads(handle.readline()).get("version", -1)
    return int(version) if isinstance(version, int) else -1


def _checkpoint_problem(log_dir: str, names: list[str], version: int) -> Damage | None:
    """The checkpoint ``_last_checkpoint`` names, if it is missing or not Parquet."""
    import pyarrow.parquet as pq

    parts = sorted(n for n in names if (m := _CHECKPOINT.match(n)) and int(m.group(1)) == version)
    if not parts:
        path = os.path.join(log_dir, f"{version:020d}.checkpoint.parquet")
        return Damage(path, "is missing (the log's _last_checkpoint names it)", newest=False)
    for name in parts:
        path = os.path.join(log_dir, name)
        try:
            pq.read_metadata(path)
        except Exception as exc:
            return Damage(path, f"is not a readable Parquet checkpoint ({exc})", newest=False)
    return None
