"""Where a run's Spark log goes (:mod:`engine.cli.sparklog`): the folder, the line that names the
file, and a JVM whose log configuration is not the engine's left as it is. What a
``./spark-submit.sh`` user sees on stderr is ``tests/e2e/test_output_hygiene.py``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.cli.sparklog import LOG_DIR_ENV, log_dir, route_spark_log, spark_log_note


def test_the_log_folder_is_engine_log_dir_else_the_users_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path / "logs"))
    assert log_dir() == tmp_path / "logs"
    monkeypatch.delenv(LOG_DIR_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert log_dir() == tmp_path / "state" / "engine" / "logs"


def test_the_note_names_a_file_the_run_wrote_and_nothing_else(tmp_path: Path) -> None:
    file = tmp_path / "j-run.log"
    assert spark_log_note(None) is None and spark_log_note(file) is None
    file.write_text("")
    assert spark_log_note(file) is None
    file.write_text("WARN TaskSetManager: Lost task 0.0\n\tat org.apache.spark...\n")
    assert spark_log_note(file) == f"Spark's warnings and errors of this run, with their stack traces: {file}"


def test_a_session_without_the_engines_log_configuration_is_left_alone(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path / "logs"))
    system = spark._jvm.java.lang.System
    assert route_spark_log("j", "run-1", debug=False, jvm=spark._jvm) is None
    assert system.getProperty("engine.spark.log") is None  # nothing set, nothing reloaded
    assert not (tmp_path / "logs").exists()
    assert route_spark_log("j", "run-1", debug=False) is None  # no spark-submit gateway here at all
