"""A run's metrics pushed when it ends, read back as received: by an HTTP receiver on loopback
speaking the Pushgateway's protocol (``PUT /metrics/job/<job>/<label>/<value>``), and from the
node-exporter textfile, both parsed by prometheus_client's own parser and held against the run's
summary. A push nobody receives leaves the run's exit code alone."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.commit.harness import run_here
from tests.helpers import Receiver, receiving


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as server:
        yield server


def jobs(tmp_path: Path) -> Path:
    land = tmp_path / "land" / "events.json"
    land.parent.mkdir(parents=True)
    land.write_text("".join(json.dumps({"id": i, "amount": i - 2}) + "\n" for i in range(6)))
    three_hours_ago = time.time() - 3 * 3600
    os.utime(land, (three_hours_ago, three_hours_ago))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "measured.conf").write_text(
        f'sources.in {{ type = files, format = json, path = "{land}", schema = "id INT, amount INT" }}\n'
        "converters = [\n"
        '  { type = check, expr = "id != 5" }\n'
        '  { type = expect, name = positive, expr = "amount > 0" }\n'
        "]\n"
        "sinks.out { type = delta, path = out }\n"
    )
    return jobs


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_run_pushes_its_summary_to_the_pushgateway_and_the_textfile(
    spark: Any, receiver: Receiver, tmp_path: Path
) -> None:
    textfile = tmp_path / "prom" / "engine_{job}.prom"
    textfile.parent.mkdir()
    code, summary = run_here(
        jobs(tmp_path),
        tmp_path / "wh",
        f"metrics.pushgateway={receiver.url}",
        f"metrics.textfile='{textfile}'",  # quoted: Hydra's grammar reads braces
        "+metrics.grouping.env=test",
        job="measured",
    )
    assert code == 0, summary
    (dag,) = summary["dags"]
    assert (dag["records_read"], dag["records_rejected"], dag["rules"]) == (6, 1, {"positive": 3})
    assert 3 * 3600 - 5 < dag["watermark_lag_seconds"] < 3 * 3600 + 300  # the file's age when the run ended

    ((method, path, body),) = receiver.received
    assert (method, path) == ("PUT", "/metrics/job/measured/env/test")
    from_file = (tmp_path / "prom" / "engine_measured.prom").read_text()
    for text in (body, from_file):
        got = samples(text)
        dag_labels = (("dag", "measured"), ("job", "measured"))
        assert got[("engine_dag_records_read", dag_labels)] == 6
        assert got[("engine_dag_records_rejected", dag_labels)] == 1
        assert got[("engine_dag_bytes_read", dag_labels)] == dag["bytes_read"] > 0
        assert got[("engine_sink_records_written", (*dag_labels, ("sink", "out")))] == 5
        assert (
            got[("engine_rule_records_flagged", (("dag", "measured"), ("job", "measured"), ("rule", "positive")))] == 3
        )
        assert got[("engine_dag_watermark_lag_seconds", dag_labels)] == dag["watermark_lag_seconds"]
        assert got[("engine_run_succeeded", (("job", "measured"),))] == 1
        assert got[("engine_run_status", (("job", "measured"), ("status", "SUCCEEDED")))] == 1
        assert got[("engine_dag_status", (*dag_labels, ("status", "SUCCEEDED")))] == 1
        assert got[("engine_run_duration_seconds", (("job", "measured"),))] == summary["seconds"]


def test_a_push_nobody_receives_changes_nothing_of_the_run(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = Receiver()
    url = closed.url
    closed.server_close()  # nothing listens there any more
    code, summary = run_here(
        jobs(tmp_path), tmp_path / "wh", f"metrics.pushgateway={url}", "metrics.timeout=2", job="measured"
    )
    assert (code, summary["status"]) == (0, "SUCCEEDED")
    assert f"metrics: pushing to {url} failed" in capsys.readouterr().err


def test_a_bad_metrics_setting_is_a_config_error(spark: Any, tmp_path: Path) -> None:
    code, summary = run_here(jobs(tmp_path), tmp_path / "wh", "metrics.timeout=0", job="measured")
    assert (code, summary["status"]) == (2, "CONFIG_ERROR")
    assert "metrics.timeout" in summary["message"]
