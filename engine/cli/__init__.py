"""The command line: Hydra app, exit codes, the run summary.

Imported lazily: the launcher (:mod:`engine.cli.launch`, what ``spark-submit.sh`` hands over to)
runs before any job is read and must not pay for importing the Hydra app and the compiler.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name != "main":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from engine.cli.app import main

    return main
