"""The ``engine`` command's spark-submit line (engine.cli.launch), built without starting Spark."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from engine.cli import launch


@pytest.mark.parametrize(
    ("argv", "own", "spark", "hydra"),
    [
        pytest.param(
            ["--master", "local[2]", "job=demo/orders", "warehouse=/tmp/wh"],
            {"--master": "local[2]"},
            [],
            ["job=demo/orders", "warehouse=/tmp/wh"],
            id="master-and-overrides",
        ),
        pytest.param(
            ["--conf", "spark.ui.enabled=false", "--conf=a=b", "--verbose", "--jars=x.jar", "-m", "job=a,b"],
            {"--jars": "x.jar"},
            ["--conf", "spark.ui.enabled=false", "--conf=a=b", "--verbose"],
            ["-m", "job=a,b"],
            id="spark-options-pass-through",
        ),
        pytest.param(
            ["job=demo/orders", "--cfg", "job", 'job.converters.2.reason="a, b"'],
            {},
            [],
            ["job=demo/orders", "--cfg", "job", 'job.converters.2.reason="a, b"'],
            id="hydra-keeps-its-own",
        ),
    ],
)
def test_arguments_split_as_spark_submit_sh_splits_them(
    argv: list[str], own: dict[str, str], spark: list[str], hydra: list[str]
) -> None:
    assert launch.split_args(argv) == (own, spark, hydra)


def test_the_command_has_the_given_jars_the_engine_zip_and_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("b.jar", "a.jar", "notes.txt"):
        (jars / name).write_text("")
    monkeypatch.setenv("ENGINE_JARS", f"{jars},/opt/extra.jar")
    cmd = launch.command(["--master", "local[2]", "--jars", "u.jar", "job=demo/orders"], tmp_path)
    assert cmd[0].endswith("/bin/spark-submit")
    assert cmd[cmd.index("--master") + 1] == "local[2]"
    assert cmd[cmd.index("--jars") + 1] == f"{jars}/a.jar,{jars}/b.jar,/opt/extra.jar,u.jar"
    assert "log4j2.properties" in cmd[cmd.index("--driver-java-options") + 1]
    zipped = Path(cmd[cmd.index("--py-files") + 1])
    names = zipfile.ZipFile(zipped).namelist()
    assert "engine/cli/entry.py" in names and "engine/__init__.py" in names
    assert all(n.endswith(".py") for n in names)
    driver = Path(cmd[-2])
    assert driver.read_text() == launch.DRIVER and cmd[-1] == "job=demo/orders"
    again = launch.command(["job=x"], tmp_path)
    assert again[again.index("--py-files") + 1] == str(zipped), "unchanged modules: the same zip, not rebuilt"
    assert len(list(tmp_path.glob("engine-*.zip"))) == 1
