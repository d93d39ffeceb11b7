"""A generic DAG executor that knows nothing of Spark: nodes with dependencies, run on threads.

``run_graph`` starts ready nodes, at most ``parallelism`` at a time, in the order of
:attr:`Node.rank` (higher priority first, then the bigger expected cost, then declaration order,
so long jobs start early and do not finish last on their own). A node whose dependency did not
succeed is skipped, and says which one; once ``stop`` is set no node starts (those left are
cancelled) and running nodes are left to the task, which is expected to watch ``stop`` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from engine.state.status import Status

T = TypeVar("T")

SUCCEEDED = Status.SUCCEEDED
SKIPPED = Status.SKIPPED
CANCELLED = Status.CANCELLED


@dataclass(frozen=True)
class Node:
    name: str
    after: tuple[str, ...] = ()
    priority: int = 0
    cost: float = 0.0
    """Expected cost (e.g. the last run's executor seconds): bigger starts earlier."""
    order: int = 0
    """Declaration order, the last tie-breaker."""

    @property
    def rank(self) -> tuple[int, float, int]:
        return (-self.priority, -self.cost, self.order)


@dataclass
class Outcome(Generic[T]):
    """What became of a node: the task's value, or why it never ran."""

    name: str
    value: T | None = None
    status: Status = SUCCEEDED
    """``SUCCEEDED`` when the task ran (its value says how it went), else ``SKIPPED``/``CANCELLED``."""
    reason: str = ""


@dataclass
class _Graph:
    nodes: dict[str, Node]
    waiting: dict[str, set[str]] = field(default_factory=dict)
    done: dict[str, bool] = field(default_factory=dict)
    """Finished nodes and whether their dependents may run."""

    def ready(self) -> list[Node]:
        ready = [self.nodes[n] for n, deps in self.waiting.items() if deps <= self.done.keys()]
        return sorted(ready, key=lambda n: n.rank)


def run_graph(
    nodes: list[Node],
    task: Callable[[Node], T],
    *,
    parallelism: int,
    ok: Callable[[T], bool],
    stop: threading.Event | None = None,
    thread_name_prefix: str = "node",
) -> dict[str, Outcome[T]]:
    """Run ``task`` for every node, dependencies first; ``ok(value)`` says whether dependents run."""
    graph = _Graph({n.name: n for n in nodes}, waiting={n.name: set(n.after) for n in nodes})
    stop = stop or threading.Event()
    outcomes: dict[str, Outcome[T]] = {}
    running: dict[Future[T], Node] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix=thread_name_prefix) as pool:
        while graph.waiting or running:
            for node in graph.ready():
                failed = [d for d in node.after if not graph.done[d]]
                if stop.is_set() or failed:
                    outcomes[node.name] = _not_run(node, failed, stop)
                    graph.done[node.name] = False
                    del graph.waiting[node.name]
                elif len(running) < max(1, parallelism):
                    running[pool.submit(task, node)] = node
                    del graph.waiting[node.name]
            if not running:
                if graph.waiting and not graph.ready():  # unreachable after compile's cycle check
                    raise ValueError(f"dependency cycle among {sorted(graph.waiting)}")
                continue
            finished, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                node = running.pop(future)
                value = future.result()
                outcomes[node.name] = Outcome(node.name, value)
                graph.done[node.name] = ok(value)
    return {n.name: outcomes[n.name] for n in nodes}


def _not_run(node: Node, failed: list[str], stop: threading.Event) -> Outcome[T]:
    if failed:
        return Outcome(node.name, status=SKIPPED, reason=f"skipped: upstream {', '.join(failed)} did not succeed")
    return Outcome(node.name, status=CANCELLED, reason="cancelled before it started: the run was asked to stop")
