"""What a check of a records DAG's chain depends on, as one key.

:func:`engine.runtime.records.planning.plan` builds the whole chain over an empty frame
to surface every config mistake; on a fresh JVM that analysis costs seconds. A run skips it when a
check with the same key passed before (new data changes none of it): the same schema, the same config of
the source, the steps, the branches and the sinks, the same code (the engine's files and those of
each plugin's top-level package) and the same Spark SQL settings give the same outcome. Change any
of them and the check runs again, so a mistake still surfaces on the first run after it is made.
A step whose check reads something outside the config (a reference table's schema) must add it
to the key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark

from engine.platform.jvm import session_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.spec import DagSpec
    from engine.spec.model import PluginSpec

__all__ = ["chain_key", "sql_settings"]


def sql_settings(spark: SparkSession) -> list[tuple[str, str]]:
    """The session's ``spark.sql.*`` settings, taken before the DAG plans: reading files may make
    a library set some of its own (Delta's Parquet field ids), which must not change the key."""
    return sorted((k, v) for k, v in session_settings(spark).items() if k.startswith("spark.sql."))


def chain_key(settings: list[tuple[str, str]], spec: DagSpec, schema: str) -> str:
    """A digest of everything the chain check of ``spec`` over ``schema`` depends on: the source's
    declared DDL as written (then no parse is needed to tell), else the schema's JSON, and the
    session's SQL ``settings`` (:func:`sql_settings`)."""
    plugins = [spec.source, *spec.steps, *spec.sinks]
    parts = {
        "schema": schema,
        "plugins": [_plugin(p) for p in plugins],
        "branches": sorted(spec.branches.items()),
        "error_table": spec.error_table,
        "gates": list(spec.gates),
        "code": _code(plugins),
        "sql": settings,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _plugin(p: PluginSpec) -> list[str]:
    return [p.name, p.key, p.entry.impl, p.conf.model_dump_json()]


def _code(plugins: list[PluginSpec]) -> list[str]:
    """The code the check runs: the engine's and that of each plugin's top-level package."""
    tops = sorted({"engine", *(p.entry.impl.partition(":")[0].split(".")[0] for p in plugins)})
    return [pyspark.__version__, *(_package_code(top) for top in tops)]


@cache
def _package_code(top: str) -> str:
    """Top-level package ``top``'s code: each source file's size and modification time (in a zip
    shipped with ``--py-files`` or an egg: the archive's), read once per process."""
    module = sys.modules.get(top)
    roots = [Path(p) for p in getattr(module, "__path__", [])] or [Path(getattr(module, "__file__", None) or top)]
    stamps: list[str] = []
    for root in roots:
        if not root.is_dir():
            stamps.append(_file_stamp(root))
            continue
        for here, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(here, name)
                    st = os.stat(path)
                    stamps.append(f"{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(stamps).encode()).hexdigest()


def _file_stamp(path: Path) -> str:
    """``path``'s size and modification time, or those of the archive it lies in."""
    for candidate in (path, *path.parents):
        if candidate.is_file():
            st = candidate.stat()
            return f"{candidate}:{st.st_size}:{st.st_mtime_ns}"
    return str(path)
