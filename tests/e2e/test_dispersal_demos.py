"""The demo jobs of each direction (jobs/demo/kafka_orders, orders_to_postgres, orders_to_kafka)
run through the command line's entry against the tests' broker and PostgreSQL: Kafka into the lake,
then the lake out to a database table and to another topic. Checked with psql and librdkafka."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import delta_ids, run_cli

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_jobs_move_orders_from_kafka_to_the_lake_and_out(
    spark: Any, lake: Path, kafka: Any, postgres: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka.bootstrap)
    monkeypatch.setenv("DEMO_JDBC_URL", postgres.jdbc_url)
    monkeypatch.setenv("DEMO_JDBC_USER", postgres.user)
    monkeypatch.setenv("DEMO_JDBC_PASSWORD", postgres.password)
    for topic in ("orders", "orders_clean"):
        kafka.create_topic(topic, partitions=3)
    postgres.psql(
        "DROP TABLE IF EXISTS demo_orders; CREATE TABLE demo_orders "
        "(order_id BIGINT PRIMARY KEY, customer TEXT, amount DOUBLE PRECISION, kafka_offset BIGINT)"
    )
    orders = [{"order_id": i % 30, "customer": f"c{i}", "amount": float(i)} for i in range(40)]  # 10 updates
    kafka.produce("orders", [json.dumps(o) for o in orders], keys=[str(o["order_id"]) for o in orders])
    kafka.produce("orders", ['{"order_id": 99, "amount": -1}', "not json"], keys=["99", "x"])
    jobs = REPO / "jobs"

    code, summary, said = run_cli(jobs, "job=demo/kafka_orders", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    assert (summary["records_read"], summary["errors"]) == (42, 2)
    assert delta_ids(lake / "bus" / "orders", "order_id") == sorted(o["order_id"] for o in orders)

    code, summary, said = run_cli(jobs, "job=demo/orders_to_postgres", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    latest = {o["order_id"]: o["customer"] for o in orders}  # keyed: one partition each, later offsets win
    found = dict(line.split("|") for line in postgres.psql("SELECT order_id, customer FROM demo_orders").splitlines())
    assert found == {str(k): v for k, v in latest.items()}

    code, summary, said = run_cli(jobs, "job=demo/orders_to_kafka", f"warehouse={lake}")
    assert code == 0, said[-3000:]
    sent = [json.loads(v) for _, _, _, v, _ in kafka.consume_all("orders_clean") if v is not None]
    assert sorted(m["order_id"] for m in sent) == sorted(o["order_id"] for o in orders)
