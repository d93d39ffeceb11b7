"""The SQL executions a test's runs make, with each plan node's metrics, read from Spark's own
SQL status store: what plan-shape guards count (scans, jobs, shuffles), with no timing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Node:
    name: str
    desc: str
    metrics: dict[str, str]


@dataclass(frozen=True)
class Execution:
    id: int
    jobs: int
    nodes: list[Node]
    plan: str = ""
    """The physical plan as ``explain(mode="formatted")`` prints it: the tree, then each node."""

    def tree_between(self, top: str, bottom: str) -> list[str]:
        """The lines of the plan's tree from the first naming ``top`` to the next naming ``bottom``."""
        tree = self.plan.split("\n\n", 1)[0].splitlines()
        start = next((i for i, line in enumerate(tree) if top in line), None)
        if start is None:
            return []
        end = next((i for i in range(start, len(tree)) if bottom in tree[i]), len(tree) - 1)
        return tree[start : end + 1]

    def writes_to(self, path: Path) -> bool:
        return any(n.name.startswith("Execute InsertInto") and str(path) in n.desc for n in self.nodes)


class SqlLog:
    """The SQL executions Spark runs from now on, with each plan node's metrics."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.store = spark._jsparkSession.sharedState().statusStore()
        self.before = {e.executionId() for e in self._all()}

    def _all(self) -> list[Any]:
        found = self.store.executionsList()
        return [found.apply(i) for i in range(found.size())]

    def executions(self) -> list[Execution]:
        self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
        out = []
        for e in self._all():
            if e.executionId() in self.before:
                continue
            values = self.store.executionMetrics(e.executionId())
            graph = self.store.planGraph(e.executionId()).allNodes()
            nodes = []
            for i in range(graph.size()):
                node = graph.apply(i)
                metrics = {}
                for j in range(node.metrics().size()):
                    m = node.metrics().apply(j)
                    value = values.get(m.accumulatorId())
                    if value.isDefined():
                        metrics[m.name()] = str(value.get())
                nodes.append(Node(node.name(), node.desc(), metrics))
            out.append(Execution(e.executionId(), e.jobs().size(), nodes, str(e.physicalPlanDescription())))
        return out
