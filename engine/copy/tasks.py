"""Packing files into Spark tasks, balanced by size: a big file (or a block of a split one) takes a
task of its own, small files share tasks up to a byte and a file count, and there are at least as
many tasks as cores while files last (longest-processing-time rule)."""

from __future__ import annotations

import heapq
import math

from engine.copy.listing import CopyableFile
from engine.copy.options import CopyItem


def blocks(f: CopyableFile, target_root: str, *, block_size: int) -> list[CopyItem]:
    """``f`` as block ranges of ``block_size`` bytes."""
    count = max(1, math.ceil(f.size / block_size))
    return [
        CopyItem(f, target_root, (i, i * block_size, min(block_size, f.size - i * block_size))) for i in range(count)
    ]


def _weight(item: CopyItem) -> int:
    size = item.block[2] if item.block else item.file.size
    return size + 64 * 1024  # opening, closing and renaming a file cost about as much as copying 64 KiB


def pack(items: list[CopyItem], *, target_bytes: int, max_files: int, min_tasks: int) -> list[list[CopyItem]]:
    if not items:
        return []
    total = sum(_weight(i) for i in items)
    count = max(math.ceil(total / target_bytes), math.ceil(len(items) / max_files), min(min_tasks, len(items)))
    count = min(count, len(items))
    heap: list[tuple[int, int, int]] = [(0, 0, i) for i in range(count)]  # (load, files, task)
    tasks: list[list[CopyItem]] = [[] for _ in range(count)]
    for item in sorted(items, key=_weight, reverse=True):
        load, files, index = heapq.heappop(heap)
        tasks[index].append(item)
        heapq.heappush(heap, (load + _weight(item), files + 1, index))
    return [t for t in tasks if t]
