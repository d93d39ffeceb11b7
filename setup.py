"""Builds the package: ``setup.cfg`` declares it; this adds the source tree's ``conf/`` and
``jvm-packages.txt`` to it as ``engine/_data/`` (they stay at the root, where ``spark-submit.sh``
and ``scripts/bootstrap.sh`` read them; an installed engine reads its copy, engine.config.app).
MANIFEST.in puts them in the sdist, which ``python -m build`` builds the wheel from."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = ("conf", "jvm-packages.txt")


class BuildWithData(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "engine" / "_data"
        for name in DATA:
            source, dest = ROOT / name, target / name
            if source.is_dir():
                shutil.copytree(source, dest, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)


setup(cmdclass={"build_py": BuildWithData})
