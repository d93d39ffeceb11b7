"""What a check of a records DAG's chain depends on, as one key.

:meth:`JobDag.plan <engine.runtime.jobdag.JobDag.plan>` builds the whole chain over an empty frame
to surface every config mistake; on a fresh JVM that analysis costs seconds. A run with nothing to
read skips it when a check with the same key passed before: the same schema, the same config of
the source, the steps, the branches and the sinks, the same code (the engine's files and each
plugin's module) and the same Spark SQL settings give the same outcome. Change any of them and the
check runs again, so a mistake still surfaces on the first run after it is made.
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

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.spec import DagSpec
    from engine.spec.model import PluginSpec

__all__ = ["chain_key"]

ENGINE_ROOT = Path(__file__).resolve().parents[1]


def chain_key(spark: SparkSession, spec: DagSpec, schema: str) -> str:
    """A digest of everything the chain check of ``spec`` over ``schema`` depends on: the source's
    declared DDL as written (then no parse is needed to tell), else the schema's JSON."""
    plugins = [spec.source, *spec.steps, *spec.sinks]
    parts = {
        "schema": schema,
        "plugins": [_plugin(p) for p in plugins],
        "branches": sorted(spec.branches.items()),
        "error_table": spec.error_table,
        "code": [_engine_code(), pyspark.__version__, *(_module_stamp(p.entry.impl) for p in plugins)],
        "sql": sorted((k, v) for k, v in spark.conf.getAll.items() if k.startswith("spark.sql.")),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _plugin(p: PluginSpec) -> list[str]:
    return [p.name, p.key, p.entry.impl, p.conf.model_dump_json()]


@cache
def _engine_code() -> str:
    """The engine's own code: each source file's size and modification time (a zip shipped with
    ``--py-files``: the zip's), read once per process."""
    stamps: list[str] = []
    if ENGINE_ROOT.is_dir():
        for top, dirs, files in os.walk(ENGINE_ROOT):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(top, name)
                    st = os.stat(path)
                    stamps.append(f"{os.path.relpath(path, ENGINE_ROOT)}:{st.st_size}:{st.st_mtime_ns}")
    else:  # inside an archive
        stamps.append(_file_stamp(ENGINE_ROOT))
    return hashlib.sha256("\n".join(stamps).encode()).hexdigest()


def _module_stamp(impl: str) -> str:
    """A plugin module's file, size and modification time (a built-in's is in the engine's code)."""
    module = sys.modules.get(impl.partition(":")[0])
    origin = getattr(module, "__file__", None)
    if module is None or origin is None or module.__name__.startswith("engine."):
        return ""
    return _file_stamp(Path(origin))


def _file_stamp(path: Path) -> str:
    """``path``'s size and modification time, or those of the archive it lies in."""
    for candidate in (path, *path.parents):
        if candidate.is_file():
            st = candidate.stat()
            return f"{candidate}:{st.st_size}:{st.st_mtime_ns}"
    return str(path)
