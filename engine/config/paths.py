"""Where the engine's own files are (its ``conf/``, ``jobs/``, ``jvm-packages.txt``), found
without importing Hydra: the launcher (:mod:`engine.cli.launch`) needs them before any job is read."""

from __future__ import annotations

import os
from pathlib import Path

SOURCE_TREE = Path(__file__).resolve().parents[2]
PACKAGED = Path(__file__).resolve().parents[1] / "_data"
"""Where an installed engine keeps the source tree's ``conf/`` and ``jvm-packages.txt`` (setup.py)."""


def packaged_file(name: str) -> Path:
    """``name`` from the installed package's data, else from the source tree the engine runs from."""
    packaged = PACKAGED / name
    return packaged if packaged.exists() else SOURCE_TREE / name


def conf_dir() -> Path:
    """``$ENGINE_CONF_DIR``, else the packaged (or the source tree's) ``conf/``."""
    env = os.environ.get("ENGINE_CONF_DIR")
    return Path(env).resolve() if env else packaged_file("conf")


def jobs_root() -> Path:
    """``$ENGINE_JOBS_DIR``, else ``jobs/`` beside the engine package in its source tree, else (an
    installed package) ``jobs/`` in the working directory."""
    env = os.environ.get("ENGINE_JOBS_DIR")
    if env:
        return Path(env).resolve()
    return SOURCE_TREE / "jobs" if (SOURCE_TREE / "conf" / "config.yaml").is_file() else Path.cwd() / "jobs"
