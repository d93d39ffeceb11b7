"""Pausing Python's cyclic garbage collector while the driver builds many small objects.

Planning a copy of many files allocates objects by the hundred thousand (listing entries,
copyable files, manifest entries), none of them in reference cycles. Each allocation burst sets off
the collector, and its full passes walk every live object of the driver (PySpark, py4j, pyarrow,
pydantic: a large heap), so collections took most of the CPU time of a no-change rerun's planning
(`bench/copy_files.py` measures it).
Reference counting still frees everything as usual; only the search for cycles waits.

The pause is process-wide (``gc.disable``), so it covers only stretches that are mostly CPU:
scanning a local tree, turning an object store's listing into records (not the wait for it),
building the copyable files, reading a manifest, diffing, and after the copy building the publish
steps from the results; milliseconds to seconds for huge trees (a local path on a slow network
mount keeps it for as long as its scan). Other DAGs' driver
threads see the collector paused for those stretches too. It
nests across threads (DAGs plan concurrently), and the collector comes back when the last pause
ends, as it was before the first.

Off switch: ``ENGINE_GC_PAUSE=off`` (the collector runs as usual).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection while the block runs (in any thread); re-enabled as it was afterwards."""
    global _holders, _was_enabled
    if os.environ.get("ENGINE_GC_PAUSE", "on") == "off":
        yield
        return
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
