"""The generic DAG executor: order, dependencies, the concurrency limit and stopping. No Spark."""

from __future__ import annotations

import threading
import time

import pytest

from engine.runtime.graph import CANCELLED, SKIPPED, SUCCEEDED, Node, run_graph


def test_one_at_a_time_the_highest_priority_then_the_costliest_starts_first() -> None:
    nodes = [
        Node("cheap", cost=1.0, order=0),
        Node("costly", cost=50.0, order=1),
        Node("urgent", priority=5, order=2),
        Node("unknown", order=3),
    ]
    started: list[str] = []
    run_graph(nodes, lambda n: started.append(n.name), parallelism=1, ok=lambda _: True)
    assert started == ["urgent", "costly", "cheap", "unknown"]


def test_dependents_of_a_failed_node_are_skipped_and_say_which_upstream() -> None:
    nodes = [Node("a"), Node("b", after=("a",)), Node("c", after=("b",)), Node("d")]
    out = run_graph(nodes, lambda n: n.name != "a", parallelism=2, ok=bool)
    assert (out["a"].status, out["a"].value) == (SUCCEEDED, False)
    assert out["b"].status == SKIPPED and "upstream a" in out["b"].reason
    assert out["c"].status == SKIPPED and "upstream b" in out["c"].reason
    assert (out["d"].status, out["d"].value) == (SUCCEEDED, True)


def test_a_node_starts_only_after_all_its_upstreams_succeeded() -> None:
    finished: dict[str, float] = {}
    started: dict[str, float] = {}

    def task(node: Node) -> bool:
        started[node.name] = time.monotonic()
        time.sleep(0.2 if node.name == "slow" else 0.01)
        finished[node.name] = time.monotonic()
        return True

    nodes = [Node("slow"), Node("fast"), Node("join", after=("slow", "fast"))]
    run_graph(nodes, task, parallelism=3, ok=bool)
    assert started["join"] >= max(finished["slow"], finished["fast"])


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_never_more_than_parallelism_nodes_run_at_once(parallelism: int) -> None:
    lock, running, peak = threading.Lock(), [0], [0]

    def task(_: Node) -> bool:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return True

    run_graph([Node(f"n{i}", order=i) for i in range(7)], task, parallelism=parallelism, ok=bool)
    assert peak[0] == parallelism


def test_once_stopped_no_node_starts_and_the_rest_are_cancelled() -> None:
    stop = threading.Event()

    def task(node: Node) -> bool:
        stop.set()  # the first node asks the run to stop
        return True

    nodes = [Node("first", priority=1), Node("second"), Node("third", after=("first",))]
    out = run_graph(nodes, task, parallelism=1, ok=bool, stop=stop)
    assert out["first"].status == SUCCEEDED
    assert out["second"].status == CANCELLED and out["third"].status == CANCELLED
    assert "asked to stop" in out["second"].reason
