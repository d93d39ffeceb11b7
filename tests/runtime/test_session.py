"""FAIR scheduler settings from a job's ``pools`` (no JVM: the allocation file Spark reads)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from engine.runtime.session import fair_pools
from engine.spec.model import PoolConf


def test_pools_become_an_allocation_file_spark_reads_at_start() -> None:
    conf = fair_pools({"urgent": PoolConf(weight=4, min_share=1), "bulk": PoolConf()})
    assert conf["spark.scheduler.mode"] == "FAIR"
    root = ET.parse(conf["spark.scheduler.allocation.file"]).getroot()
    pools = {p.get("name"): {c.tag: c.text for c in p} for p in root.findall("pool")}
    assert pools == {
        "bulk": {"schedulingMode": "FIFO", "weight": "1", "minShare": "0"},
        "urgent": {"schedulingMode": "FIFO", "weight": "4", "minShare": "1"},
    }
    Path(conf["spark.scheduler.allocation.file"]).unlink()


def test_without_pools_it_is_fair_scheduling_with_spark_defaults() -> None:
    assert fair_pools({}) == {"spark.scheduler.mode": "FAIR"}
