"""Cheaper Python tasks: PySpark's worker calls ``importlib.invalidate_caches()`` before every
task, and on Python 3.11 a ``zipimporter`` answers by reading its archive's whole directory again.
A worker's ``sys.path`` holds pyspark.zip, py4j's zip and the session's jars (16 archives here),
so every task re-read them, which can cost more than copying a small file.

:func:`steady_zip_imports`, called at the start of a task, swaps each archive's importer for one
that keeps its directory (the archives of a running application do not change). Tasks that the
same Python worker runs afterwards skip the re-reads (`bench/copy_files.py` shows the difference).
Off switch: ``ENGINE_STEADY_ZIP=off`` in the workers' environment (on a cluster,
``spark.executorEnv.ENGINE_STEADY_ZIP=off``).
"""

from __future__ import annotations

import os
import sys
import zipimport


class _SteadyZipImporter(zipimport.zipimporter):
    def invalidate_caches(self) -> None:
        """The archive does not change while the application runs: keep its directory."""


def steady_zip_imports() -> int:
    """Replace the plain zip importers of this process; returns how many were replaced."""
    replaced = 0
    if os.environ.get("ENGINE_STEADY_ZIP", "on") == "off":
        return replaced
    for path, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter:
            try:
                sys.path_importer_cache[path] = _SteadyZipImporter(path)
            except zipimport.ZipImportError:
                continue
            replaced += 1
    return replaced
