"""Drift of a pinned schema: what a new file holds that the schema a JSON or CSV source pinned
does not read.

A pinned schema keeps types stable from run to run (:meth:`engine.sources.files.FilesSource.schema`),
but Spark reads a JSON file with it by name and drops a field it does not name, and a CSV file's
header may add or lack columns (the engine reads it by the header's names,
:mod:`engine.sources.csv_headers`, unless ``enforceSchema`` asks for positions). So a producer that
adds fields would go unnoticed. Each run that reads with a pinned schema looks at the head of the newest file of each
dataset, on the driver (no Spark job, no record of the hot path), and says what differs:

- JSON lines: top-level fields the schema does not have (those of the first lines, whole ones only);
- CSV with ``header``: a header with names the schema lacks or without some of its names (with
  ``enforceSchema``, read by position: any difference, order too);
- CSV without a header: lines with more values than the schema has columns.

What it finds is a warning and a note on the dataset's status (the summary's ``notes``,
``mode=status``); reading goes on with the pinned schema. Declaring the ``schema`` (which always
wins) reads the new fields.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping

from engine.sources.csv_headers import reads_by_name

HEAD_BYTES = 64 * 1024
"""How much of a file is looked at."""
MAX_LINES = 200
"""At most this many lines of it."""
_SHOWN = 10


def drift(fmt: str, head: bytes, columns: list[str], options: Mapping[str, str], *, whole: bool) -> str:
    """What the head of a file (``whole``: the whole file) holds that ``columns`` (the pinned
    schema's, in order) do not read; ``""`` when nothing, or when the head cannot tell."""
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if not whole and lines:
        lines = lines[:-1]  # the last line may be cut
    lines = lines[:MAX_LINES]
    if fmt == "json" and str(options.get("multiLine", "false")).lower() != "true":
        return _json_drift(lines, columns)
    if fmt == "csv":
        return _csv_drift(lines, columns, options)
    return ""


def _json_drift(lines: list[str], columns: list[str]) -> str:
    known = set(columns)
    new: dict[str, None] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a malformed line is the error table's business
        if isinstance(record, dict):
            new.update((k, None) for k in record if k not in known)
    return f"field(s) {_names(list(new))} are not in the pinned schema: they are not read" if new else ""


def _csv_drift(lines: list[str], columns: list[str], options: Mapping[str, str]) -> str:
    sep = str(options.get("sep", options.get("delimiter", ",")))
    quote = str(options.get("quote", '"')) or '"'
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines)), delimiter=sep[:1] or ",", quotechar=quote[:1]) if r]
    if not rows:
        return ""
    if str(options.get("header", "false")).lower() == "true":
        header = [h.strip() for h in rows[0]]
        if header == columns:
            return ""
        added = [h for h in header if h not in columns]
        gone = [c for c in columns if c not in header]
        if reads_by_name(options):  # read by the header's names (engine.sources.csv_headers): order is no drift
            parts = [
                f"new column(s) {_names(added)}, which are not read" if added else "",
                f"no column(s) {_names(gone)}, so its records are rejected" if gone else "",
            ]
            return f"the header has {' and '.join(p for p in parts if p)}" if added or gone else ""
        if not added and not gone:
            return f"the header's columns are in another order than the pinned schema's: {_names(header)}"
        parts = [f"new column(s) {_names(added)}" if added else "", f"no column(s) {_names(gone)}" if gone else ""]
        said = " and ".join(p for p in parts if p)
        return f"the header has {said}: values are read by position with the pinned schema (enforceSchema)"
    widest = max(len(r) for r in rows)
    if widest > len(columns):
        return f"lines of {widest} values, the pinned schema has {len(columns)} columns: the last are not read"
    return ""


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
