"""Import pyspark and py4j from their installed, byte-compiled packages, not spark-submit's zips.

``spark-submit`` puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` first on the
driver's ``sys.path``. Python does not cache byte code for modules imported from a zip, so every
run compiled pyspark's ~200 modules again: 0.8 s of a run's fixed cost. When Spark is the pip
package (``$SPARK_HOME`` is the installed ``pyspark`` directory), the installed package is the very
same code, compiled once at install: the driver imports it instead. A Spark distribution of its
own (another ``$SPARK_HOME``) is left alone. Executors' Python workers are not affected.
Off switch: ``ENGINE_COMPILED_PYSPARK=off`` (the driver imports spark-submit's zips).
"""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["prefer_compiled_pyspark"]

_ZIPS = re.compile(r"(pyspark|py4j-(?P<py4j>[0-9.]+)-src)\.zip")


def prefer_compiled_pyspark() -> list[str]:
    """Drop spark-submit's pyspark/py4j zips from ``sys.path`` where the installed package is the
    same code (call before pyspark is imported); the entries dropped."""
    if "pyspark" in sys.modules or os.environ.get("ENGINE_COMPILED_PYSPARK", "on") == "off":
        return []
    dropped = [entry for entry in sys.path if _same_as_installed(entry)]
    sys.path[:] = [entry for entry in sys.path if entry not in dropped]
    return dropped


def _same_as_installed(entry: str) -> bool:
    path = Path(entry)
    match = _ZIPS.fullmatch(path.name)
    if match is None or path.parent.parts[-2:] != ("python", "lib"):
        return False
    try:
        installed = Path(str(metadata.distribution("pyspark").locate_file("pyspark")))
        if path.parent.parent.parent.resolve() != installed.resolve():
            return False  # a Spark distribution of its own
        if match["py4j"] is not None:
            return metadata.version("py4j") == match["py4j"]
        return metadata.version("pyspark") == _zip_version(path)
    except (metadata.PackageNotFoundError, OSError, KeyError):
        return False


def _zip_version(path: Path) -> str | None:
    """The version the zip's ``pyspark/version.py`` declares."""
    from zipfile import ZipFile

    with ZipFile(path) as archive:
        text = archive.read("pyspark/version.py").decode()
    found = re.search(r"""__version__[^=]*=\s*["']([^"']+)["']""", text)
    return found.group(1) if found else None
