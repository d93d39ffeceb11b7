"""A run's metrics in Prometheus' format, pushed when it ends: to a Pushgateway, to a textfile that
node-exporter's textfile collector reads, or both (``metrics.pushgateway``, ``metrics.textfile``).

Everything comes from the run's summary, so what is pushed is what the summary says: records
read, rejected, dropped and written (per DAG and sink), bytes read, what each counted rule
flagged, durations and cost, each DAG's status, and how far its oldest watermark lags behind
now (time-based watermarks only). A batch job is pushed, not scraped: the Pushgateway keeps the
last run's values under the job's grouping key (``job``, and ``metrics.grouping``), replaced by
the next run's. A push that fails is logged and changes nothing of the run (its exit code stays).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

from engine.spec.app import MetricsConf

log = logging.getLogger(__name__)

__all__ = ["push_metrics", "registry_of"]

_PER_DAG = (
    ("records_read", "engine_dag_records_read", "Records the DAG read in the run, published or not"),
    ("records_rejected", "engine_dag_records_rejected", "Records sent to the error table"),
    ("records_dropped", "engine_dag_records_dropped", "Records the chain dropped on purpose (dedupe)"),
    ("bytes_read", "engine_dag_bytes_read", "Bytes of input the DAG's committed datasets read"),
    ("seconds", "engine_dag_duration_seconds", "Wall-clock seconds the DAG ran"),
    ("executor_seconds", "engine_dag_executor_seconds", "Executor seconds the DAG's reads cost"),
    ("watermark_lag_seconds", "engine_dag_watermark_lag_seconds", "How far its oldest watermark is behind now"),
)


def registry_of(summary: dict[str, Any], *, now: float | None = None) -> CollectorRegistry:
    """The metrics of the run ``summary`` describes (its JSON summary, as printed)."""
    registry = CollectorRegistry()
    job = str(summary.get("job", "?"))

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, ("job", *labels), registry=registry)

    gauge("engine_run_last_end_timestamp_seconds", "When the run ended (Unix time)").labels(job).set(
        now if now is not None else time.time()
    )
    gauge("engine_run_duration_seconds", "The whole run, Spark start-up included").labels(job).set(
        float(summary.get("seconds") or 0)
    )
    gauge("engine_run_succeeded", "1 if the run succeeded, 0 if not").labels(job).set(
        1 if summary.get("status") == "SUCCEEDED" else 0
    )
    status = gauge("engine_run_status", "1 for the run's status", ("status",))
    status.labels(job, str(summary.get("status"))).set(1)
    dags = [d for d in summary.get("dags", []) if isinstance(d, dict)]
    per_dag = {key: gauge(name, doc, ("dag",)) for key, name, doc in _PER_DAG}
    dag_status = gauge("engine_dag_status", "1 for the DAG's status", ("dag", "status"))
    written = gauge("engine_sink_records_written", "Records each sink received", ("dag", "sink"))
    flagged = gauge("engine_rule_records_flagged", "Records each counted rule flagged", ("dag", "rule"))
    for d in dags:
        name = str(d["name"])
        dag_status.labels(job, name, str(d.get("status"))).set(1)
        for key, gauge_ in per_dag.items():
            if d.get(key) is not None:
                gauge_.labels(job, name).set(float(d[key]))
        for sink, n in (d.get("sinks") or {}).items():
            written.labels(job, name, sink).set(n)
        for rule, n in (d.get("rules") or {}).items():
            flagged.labels(job, name, rule).set(n)
    return registry


def push_metrics(conf: MetricsConf, summary: dict[str, Any]) -> None:
    """Push ``summary``'s metrics where ``conf`` says; nothing when it names nowhere."""
    if not conf.pushgateway and not conf.textfile:
        return
    registry = registry_of(summary)
    job = str(summary.get("job", "?"))
    if conf.textfile:
        try:
            write_to_textfile(conf.textfile.replace("{job}", job), registry)  # written aside, then renamed
        except OSError as exc:
            log.warning("metrics: cannot write the textfile %s: %s", conf.textfile, exc)
    if conf.pushgateway:
        try:
            push_to_gateway(
                conf.pushgateway, job=job, registry=registry, grouping_key=dict(conf.grouping), timeout=conf.timeout
            )
        except Exception as exc:  # the run is done; its metrics are not worth its exit code
            log.warning("metrics: pushing to %s failed: %s", conf.pushgateway, exc)
