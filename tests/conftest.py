"""One SparkSession for the whole run (local[2], few shuffle partitions, UI off, UTC, Delta on)
and a fresh lake directory per test. Tests that need no JVM never touch the ``spark`` fixture."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Java options of every driver JVM a test starts through spark-submit (a whole command, a crash
driver, the flow service's executions), through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to
the driver's command: C1 only, as a run of a few seconds never repays C2's compiling. The demo job
through ``./spark-submit.sh``: 15.2 s and 24.7 s of CPU by default, 11.7 s and 13.3 s so.

The session's own JVM (:func:`spark`), which lives for the whole run, keeps the default: with C1
only it was faster over three minutes of tests on two workers (185.5 s, 161.6 s) but far slower
over a whole run (46% of the suite after 22 minutes, against 71% by default)"""


def pytest_configure(config: pytest.Config) -> None:
    """The runs' Spark log files (engine/cli/sparklog.py) in the test run's own temporary folder,
    for this process and every run it starts: never in the user's home. The drivers the tests start
    compile with C1 only (:data:`SHORT_JVM_OPTIONS`)."""
    os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_JVM_OPTIONS)
    if "ENGINE_LOG_DIR" not in os.environ:
        import atexit
        import shutil
        import tempfile

        os.environ["ENGINE_LOG_DIR"] = tempfile.mkdtemp(prefix="engine-test-logs-")
        atexit.register(shutil.rmtree, os.environ["ENGINE_LOG_DIR"], True)


pytest_plugins = ["tests.kafka", "tests.postgres", "tests.s3", "tests.timing"]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from engine.runtime.session import build_session, cached_class_path, cached_jars

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers import pyarrow (as scripts/test.sh sets)
    from engine.platform.jvm_temp import java_tmpdir_options

    java = java_tmpdir_options()  # Spark's and the JVM's temp files under the run's TMPDIR
    options = f"--driver-java-options {shlex.quote(' '.join(java))} " if java else ""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory 2g {options}pyspark-shell")
    short = os.environ.pop("SPARK_SUBMIT_OPTS", None)  # for the drivers tests start, not this long-lived one
    try:
        session = build_session(
            "engine-tests",
            {
                "spark.sql.shuffle.partitions": 2,
                "spark.default.parallelism": 2,
                "spark.ui.enabled": "false",
                "spark.sql.sources.parallelPartitionDiscovery.parallelism": 2,
                "spark.databricks.delta.snapshotPartitions": 2,
                "spark.scheduler.mode": "FAIR",  # as the CLI runs it: DAGs share the cores by pool
                # plan-shape guards find a scan or a write by its path in the node's description, which
                # Spark cuts at 100 characters: the test command's temp root made the paths longer
                "spark.sql.maxMetadataStringLength": 1000,
            },
            master="local[2]",
            jars=cached_jars(REPO),
            class_path=cached_class_path(REPO),
        )
    finally:
        if short is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = short
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A fresh warehouse directory for one test."""
    path = tmp_path / "lake"
    path.mkdir()
    return path


SLOW_MARKERS = ("e2e", "crash", "cluster")
"""Markers of tests that start a process or a server of their own (a whole command, a driver killed at a
point, a standalone cluster): ``slow`` too, which ``--quick`` leaves out."""

QUICK_PER_MODULE = 3
"""How many test functions of each module ``--quick`` keeps (the first, in file order, that are not
slow), each with its first case only."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help=f"the inner loop: no slow tests, the first {QUICK_PER_MODULE} of each module (scripts/test.sh --quick)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if "postgres" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if "kafka" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
    if config.getoption("--quick"):
        _keep_quick(config, items)


def _keep_quick(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every module still runs (each package is touched), but only its first few fast test
    functions, each with its first case."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    functions: dict[str, set[str]] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        seen = functions.setdefault(module, set())
        name = getattr(item, "originalname", item.name)
        if item.get_closest_marker("slow") or name in seen or len(seen) >= QUICK_PER_MODULE:
            dropped.append(item)
            continue
        seen.add(name)
        kept.append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
