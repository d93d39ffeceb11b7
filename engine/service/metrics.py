"""``/metrics`` in Prometheus' exposition format (``prometheus_client``).

Read from the store at each scrape, so every instance answers the same counts, and they survive
restarts: executions by status and their durations (all the store holds), the flows, and this
instance's scheduler (leader or not, how late it started its last slot).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from engine.service.service import Service

DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0)
"""Seconds: a flow's execution takes from tens of seconds (a JVM starts) to hours."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class StoreCollector(Collector):
    def __init__(self, service: Service) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        rows = self.service.executions.all()
        ended = Counter(r["status"] for r in rows if r["end_time"] is not None)
        executions = CounterMetricFamily(
            "engine_flow_executions", "Ended flow executions, by status", labels=["status"]
        )
        for status, count in sorted(ended.items()):
            executions.add_metric([status], count)
        yield executions
        yield GaugeMetricFamily(
            "engine_flow_executions_running",
            "Flow executions started and not ended",
            value=sum(r["end_time"] is None for r in rows),
        )
        yield _durations([(r["end_time"] - r["start_time"]).total_seconds() for r in rows if r["end_time"] is not None])
        flows = GaugeMetricFamily(
            "engine_flows", "Flows the service knows, by where they are defined", labels=["origin"]
        )
        for origin, count in sorted(Counter(f.origin for f in self.service.flows.listed()).items()):
            flows.add_metric([origin], count)
        yield flows
        scheduler = self.service.scheduler
        yield GaugeMetricFamily(
            "engine_scheduler_leader",
            "1 if this instance schedules flows now",
            value=int(bool(scheduler and scheduler.leader)),
        )
        yield GaugeMetricFamily(
            "engine_scheduler_lag_seconds",
            "How late after its slot this instance started its last scheduled execution",
            value=scheduler.lag_seconds if scheduler else 0.0,
        )


def _durations(seconds: list[float]) -> HistogramMetricFamily:
    buckets = [(str(b), sum(s <= b for s in seconds)) for b in DURATION_BUCKETS]
    return HistogramMetricFamily(
        "engine_flow_execution_duration_seconds",
        "How long ended flow executions took",
        buckets=[*buckets, ("+Inf", len(seconds))],
        sum_value=sum(seconds),
    )


def exposition(service: Service) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(service))
    return generate_latest(registry)
