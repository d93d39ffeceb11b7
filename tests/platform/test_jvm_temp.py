"""The JVM's temporary folder follows ``TMPDIR`` (engine/platform/jvm_temp.py): the option the
launcher gives the driver, as a real JVM reads it, and its off switch."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine.cli import launch
from engine.platform.jvm_temp import java_tmpdir_options


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "the tests need Java"
    return java


def test_the_driver_s_java_io_tmpdir_is_tmpdir_and_a_real_jvm_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.delenv("ENGINE_JVM_TMPDIR", raising=False)
    assert java_tmpdir_options() == [f"-Djava.io.tmpdir={scratch}"]
    cmd = launch.command(["job=x"], tmp_path)
    assert f"-Djava.io.tmpdir={scratch}" in cmd[cmd.index("--driver-java-options") + 1].split()
    shown = subprocess.run(
        [_java(), *java_tmpdir_options(), "-XshowSettings:properties", "-version"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert f"java.io.tmpdir = {scratch}" in shown.stderr


@pytest.mark.parametrize(
    ("env", "why"),
    [
        pytest.param({"ENGINE_JVM_TMPDIR": "off"}, "the off switch", id="off"),
        pytest.param({"TMPDIR": ""}, "no TMPDIR", id="unset"),
        pytest.param({"TMPDIR": "/no/such/folder"}, "a TMPDIR that is not a folder", id="missing"),
        pytest.param({"TMPDIR": "<tmp>/a b"}, "spark-submit would split the option at the space", id="space"),
    ],
)
def test_no_option_when_it_is_off_or_cannot_be_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], why: str
) -> None:
    (tmp_path / "a b").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value.replace("<tmp>", str(tmp_path)))
    assert java_tmpdir_options() == [], why


def test_hadoop_s_temp_folder_follows_tmpdir_and_its_off_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.platform.jvm_temp import hadoop_temp_settings

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("USER", "someone")
    monkeypatch.delenv("ENGINE_JVM_TMPDIR", raising=False)
    assert hadoop_temp_settings() == {"spark.hadoop.hadoop.tmp.dir": str(tmp_path / "hadoop-someone")}
    monkeypatch.setenv("ENGINE_JVM_TMPDIR", "off")
    assert hadoop_temp_settings() == {}


def test_the_session_s_hadoop_scratch_is_under_the_tmpdir_it_started_with(spark: Any) -> None:
    """The test command points TMPDIR at its own root: S3A's buffers (``hadoop.tmp.dir``) go there,
    not to ``/tmp/hadoop-<user>``, which a run would leave behind."""
    started_with = os.environ.get("TMPDIR")
    if not started_with or not os.path.isdir(started_with):
        pytest.skip("no TMPDIR folder: the JVM keeps Hadoop's default (scripts/test.sh always sets one)")
    scratch = spark.sparkContext._jsc.hadoopConfiguration().get("hadoop.tmp.dir")
    assert scratch.startswith(os.path.abspath(started_with) + os.sep), scratch
