"""The driver imports pyspark and py4j from the installed, byte-compiled packages when spark-submit's
zips hold the same code (``engine.platform.pyspark_path``)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from engine.platform.pyspark_path import _same_as_installed, prefer_compiled_pyspark

INSTALLED = Path(str(metadata.distribution("pyspark").locate_file("pyspark")))
LIB = INSTALLED / "python" / "lib"
PY4J_ZIP = LIB / f"py4j-{metadata.version('py4j')}-src.zip"


def test_the_pip_package_s_own_zips_are_the_installed_code() -> None:
    assert (LIB / "pyspark.zip").is_file() and PY4J_ZIP.is_file()  # the layout this relies on
    assert _same_as_installed(str(LIB / "pyspark.zip"))
    assert _same_as_installed(str(PY4J_ZIP))


def test_a_spark_distribution_of_its_own_or_another_py4j_is_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "spark-4.1.1-bin" / "python" / "lib"
    other.mkdir(parents=True)
    (other / "pyspark.zip").write_bytes((LIB / "pyspark.zip").read_bytes())
    assert not _same_as_installed(str(other / "pyspark.zip"))
    assert not _same_as_installed(str(LIB / "py4j-0.10.9.7-src.zip"))
    assert not _same_as_installed(str(LIB / "other.zip"))
    assert not _same_as_installed(str(INSTALLED.parent))


def test_nothing_changes_once_pyspark_is_imported() -> None:
    import pyspark  # noqa: F401

    path = list(sys.path)
    assert prefer_compiled_pyspark() == []
    assert sys.path == path


def test_a_driver_started_as_spark_submit_starts_it_imports_the_compiled_package() -> None:
    """spark-submit's PythonRunner puts the zips first on PYTHONPATH; the driver drops them, so
    pyspark comes from the installed package and no pyspark module is compiled from the zip."""
    code = (
        "import sys; from engine.platform.pyspark_path import prefer_compiled_pyspark\n"
        "dropped = prefer_compiled_pyspark()\n"
        "import pyspark.sql, py4j\n"
        "print(len(dropped), pyspark.__file__, py4j.__file__, sep='\\n')\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LIB / "pyspark.zip"), str(PY4J_ZIP), str(repo)])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=repo)
    assert done.returncode == 0, done.stderr
    count, spark_file, py4j_file = done.stdout.split()
    assert count == "2"
    assert spark_file == str(INSTALLED / "__init__.py")
    assert ".zip" not in py4j_file
    unfixed = subprocess.run(
        [sys.executable, "-c", "import pyspark; print(pyspark.__file__)"], env=env, capture_output=True, text=True
    )
    assert "pyspark.zip" in unfixed.stdout  # the premise: without the fix, the zip wins
    switched_off = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "ENGINE_COMPILED_PYSPARK": "off"},
        capture_output=True,
        text=True,
        cwd=repo,
    )
    assert switched_off.returncode == 0, switched_off.stderr
    assert switched_off.stdout.split()[0] == "0" and "pyspark.zip" in switched_off.stdout, (
        "the off switch keeps the zips"
    )
