"""The engine installed like any Python package: a wheel built from the tree, installed into a clean
virtualenv, runs the demo job with its ``engine`` command from a directory that is not the repo.

Offline: the wheel is built with the project's setuptools (no build isolation) and the new
virtualenv takes its dependencies from the project's ``.venv`` through a ``.pth`` file, so nothing
is downloaded; the JVM jars come from the repo's cache through ``ENGINE_JARS`` and
``ENGINE_CLASS_PATH`` (without the second, the command resolved the S3 connector and its SDK from Maven
Central on every run: 40 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.e2e import REPO

pytestmark = pytest.mark.e2e

TREE = ("engine", "conf", "jvm-packages.txt", "setup.cfg", "setup.py", "pyproject.toml", "README.md", "MANIFEST.in")
"""What building the package reads (copied, so building leaves nothing in the repo)."""
DATA = ("conf/config.yaml", "conf/log4j2.properties", "conf/spark/local.yaml", "jvm-packages.txt")
"""The data files setup.py copies into the package as ``engine/_data/``."""

CHECK = """
import importlib.metadata as md, json, engine
from packaging.requirements import Requirement
bad = [str(r) for r in map(Requirement, md.requires("engine") or [])
       if not r.specifier.contains(md.version(r.name), prereleases=True)]
print(json.dumps({"module": engine.__file__, "unsatisfied": bad, "requires": md.requires("engine")}))
"""


def run(*cmd: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done  # type: ignore[no-any-return]


def copy_tree(src: Path) -> Path:
    for name in TREE:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    return src


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed: its ``bin/``."""
    tmp = tmp_path_factory.mktemp("install")
    src, dist, venv = copy_tree(tmp / "src"), tmp / "dist", tmp / "venv"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", dist, src)
    (wheel,) = dist.glob("engine-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    where = run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    site = Path(where.stdout.strip())
    (site / "project_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")  # dependencies: the project's
    run(*pip, "--python", venv / "bin" / "python", "install", "--no-index", "--no-deps", wheel)
    return venv / "bin"


def test_the_wheel_declares_what_it_needs_and_the_project_venv_satisfies_it(installed: Path) -> None:
    found = json.loads(run(installed / "python", "-c", CHECK, cwd=installed).stdout)
    assert found["module"].startswith(str(installed.parent)), "the engine comes from the wheel, not the repo"
    assert found["unsatisfied"] == []
    names = {r.split(">")[0].split("<")[0].split("=")[0] for r in found["requires"]}
    assert {"pyspark", "delta-spark", "deltalake", "pyarrow", "hydra-core", "pyhocon", "pydantic"} <= names


def test_an_sdist_carries_what_setup_py_reads_and_builds_a_wheel_with_the_data(tmp_path: Path) -> None:
    """As ``python -m build`` does: the sdist, then a wheel from the unpacked sdist (before
    MANIFEST.in the sdist lacked conf/ and jvm-packages.txt and setup.py's copy failed)."""
    src, dist = copy_tree(tmp_path / "src"), tmp_path / "dist"
    run(sys.executable, "setup.py", "-q", "sdist", "-d", dist, cwd=src)
    (sdist,) = dist.glob("engine-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {*DATA, "setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in"} <= names
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", dist, sdist, cwd=tmp_path)
    (wheel,) = dist.glob("engine-*.whl")
    assert {f"engine/_data/{name}" for name in DATA} <= set(zipfile.ZipFile(wheel).namelist())


def test_the_engine_command_runs_the_demo_job_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    cwd, wh = tmp_path / "work", tmp_path / "wh"
    shutil.copytree(REPO / "jobs" / "demo", cwd / "jobs" / "demo")  # jobs: ./jobs by default
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHON", "ENGINE_"))}
    env.update(ENGINE_JARS=str(REPO / ".cache" / "jars"), ENGINE_CLASS_PATH=str(REPO / ".cache" / "classpath"))
    env.update(ENGINE_CACHE=str(tmp_path / "cache"), ENGINE_CDS="train")
    spark = ["--master", "local[2]", "--driver-memory", "1g", "--conf", "spark.ui.enabled=false"]
    proc = subprocess.run(
        [installed / "engine", *spark, "job=demo/orders", f"warehouse={wh}"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env=env,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (summary["status"], summary["sinks"]) == ("SUCCEEDED", {"orders.lake": 40, "orders.big_orders": 15})
    orders = DeltaTable(str(wh / "orders")).to_pyarrow_table().to_pylist()
    assert sorted(r["order_id"] for r in orders) == list(range(1, 41))
    assert sorted(p.name for p in cwd.iterdir()) == ["jobs"], "nothing else lands in the working directory"
    assert [p.suffix for p in (tmp_path / "cache").glob("engine-*")] == [".zip"], "the package went to executors"
    (archive,) = (tmp_path / "cache" / "cds").glob("*.jsa")  # asked for: the driver's classes, for the next runs
    assert archive.stat().st_size > 0


def test_the_engine_command_makes_a_master_key_and_encrypts_without_a_job_or_a_jvm(
    installed: Path, tmp_path: Path
) -> None:
    from engine.config.secrets import MASTER_KEY_ENV, Secrets

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHON", "ENGINE_", "JAVA"))}
    env.update({MASTER_KEY_ENV: str(tmp_path / "master.key"), "ENGINE_CACHE": str(tmp_path / "cache")})
    run(installed / "engine", "mode=new_key", cwd=tmp_path, env=env)
    done = run(installed / "engine", "mode=encrypt", cwd=tmp_path, env=env, input="swordfish\n")
    (value,) = done.stdout.split()
    assert Secrets({MASTER_KEY_ENV: str(tmp_path / "master.key")}).reveal({"p": value}) == {"p": "swordfish"}
    assert not (tmp_path / "cache").exists(), "nothing was prepared for spark-submit"


def test_without_engine_jars_the_jvm_packages_are_resolved_once_into_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.cli import launch

    # Ivy's cache is the one scripts/bootstrap.sh filled (so nothing is downloaded); the jars are new.
    (tmp_path / "ivy").symlink_to(REPO / ".cache" / "ivy")
    monkeypatch.setattr(launch, "SOURCE_TREE", tmp_path / "no-tree")  # as installed: no .cache/jars beside it
    monkeypatch.delenv("ENGINE_JARS", raising=False)
    monkeypatch.delenv("ENGINE_CLASS_PATH", raising=False)
    jars = launch.engine_jars(tmp_path)
    want = sorted(p.name for p in (REPO / ".cache" / "jars").glob("*.jar"))
    assert sorted(Path(j).name for j in jars) == want
    assert all(Path(j).parent.parent == tmp_path and Path(j).stat().st_size > 0 for j in jars)
    assert launch.engine_jars(tmp_path) == jars, "resolved once: the second call finds them"
    class_path = launch.engine_class_path(tmp_path)
    assert sorted(Path(j).name for j in class_path) == sorted(
        p.name for p in (REPO / ".cache" / "classpath").glob("*.jar")
    )
    assert any("hadoop-aws" in j for j in class_path) and not any("hadoop-aws" in j for j in jars)
