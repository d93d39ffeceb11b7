"""Independent readers for what a catalogue case leaves: delta-rs for a Delta table, pyarrow for a
folder of Parquet, JSON or CSV files (never Spark, which wrote them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.catalogue.case import Rows

_SKIPPED = ("_", ".")
"""Files and folders no reader of a folder of files takes: ``_SUCCESS``, ``_engine_staging``,
``.crc`` checksums, ``_delta_log``."""


def read_table(path: Path) -> pa.Table | None:
    """What a reader finds at ``path``: ``None`` if nothing is there."""
    if not path.exists():
        return None
    if (path / "_delta_log").is_dir():
        from deltalake import DeltaTable

        return DeltaTable(str(path)).to_pyarrow_table()
    files = [f for f in sorted(path.rglob("*")) if f.is_file() and not _hidden(f, path)]
    if not files:
        return None
    return pa.concat_tables([_read_file(f) for f in files], promote_options="default")


def _hidden(file: Path, root: Path) -> bool:
    return any(part.startswith(_SKIPPED) for part in file.relative_to(root).parts)


def _read_file(file: Path) -> pa.Table:
    import pyarrow.csv as csv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    name = file.name.split(".c000")[0] if ".c000" in file.name else file.name
    if name.endswith(".parquet") or ".parquet" in file.name:
        return pq.read_table(file)
    if ".json" in file.name:
        return pjson.read_json(file)
    if ".csv" in file.name:
        return csv.read_csv(file)
    raise AssertionError(f"no reader for {file}")


def check_rows(where: str, table: pa.Table | None, expected: Rows | None) -> None:
    """Assert ``table`` (read at ``where``) is as ``expected`` says."""
    rows = 0 if table is None else table.num_rows
    if expected is None:
        assert rows == 0, f"{where}: expected nothing published, found {rows} row(s)"
        return
    assert table is not None, f"{where}: nothing there"
    if expected.count is not None:
        assert rows == expected.count, f"{where}: {rows} row(s), expected {expected.count}"
    for column in expected.unique:
        values = table.column(column).to_pylist()
        repeated = sorted({repr(v) for v in values if values.count(v) > 1})
        assert not repeated, f"{where}: `{column}` holds {', '.join(repeated)} more than once"
    for column, want in expected.values.items():
        got = sorted(table.column(column).to_pylist(), key=_order)
        assert got == sorted(want, key=_order), f"{where}: `{column}` is {got}, expected {sorted(want, key=_order)}"
    if expected.check is not None:
        assert expected.check(table), f"{where}: {expected.why or 'the check failed'}: {table.to_pylist()}"


def _order(value: Any) -> tuple[bool, str]:
    return (value is None, repr(value))
