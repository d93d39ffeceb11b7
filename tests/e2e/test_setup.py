"""The set-up (``scripts/bootstrap.sh``) and its JVM package resolution against Maven Central, with
a user's home that a Maven build has left a POM without its jar in. Each test sets up a throwaway
copy of the tree (this tree's engine and packages linked in, its own ``.cache``, stamps and, but
for the no-job test, a ``jvm-packages.txt`` naming one small artifact; nothing of this tree
written), with ``HOME`` and Java's ``user.home`` (the passwd entry's home, which Spark's resolver
reads, not ``$HOME``) at a fake home. The resolved jar is checked against the SHA-1 Maven Central
publishes for it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.e2e import REPO

pytestmark = pytest.mark.e2e

GROUP, ARTIFACT, VERSION = "org.apache.commons", "commons-pool2", "2.12.1"
COORDINATE = f"{GROUP}:{ARTIFACT}:{VERSION}"
CENTRAL_FILE = f"https://repo1.maven.org/maven2/{GROUP.replace('.', '/')}/{ARTIFACT}/{VERSION}/{ARTIFACT}-{VERSION}"
LOCAL_BUILD_DEPENDENCY = "<dependency><groupId>org.example.local</groupId><artifactId>only-here</artifactId>"
"""What a POM of a local build may declare that Maven Central has not."""


def central(suffix: str) -> bytes:
    with urllib.request.urlopen(f"{CENTRAL_FILE}{suffix}", timeout=60) as answer:
        return bytes(answer.read())


def stamp(*files: Path) -> str:
    """What ``scripts/bootstrap.sh``'s ``stamp_of`` makes of ``files`` (their contents, not their paths)."""
    script = 'cat "$@" | sha256sum | cut -c1-16'
    return subprocess.run(["bash", "-c", script, "stamp", *map(str, files)], capture_output=True, text=True).stdout


class Tree:
    """A throwaway tree whose set-up resolves :data:`COORDINATE` alone, under the fake ``home``."""

    def __init__(self, where: Path) -> None:
        self.root = where / "tree"
        self.home = where / "home"
        self.home.mkdir()
        for folder in ("scripts", ".venv"):
            (self.root / folder).mkdir(parents=True)
        (self.root / "scripts" / "bootstrap.sh").write_bytes((REPO / "scripts" / "bootstrap.sh").read_bytes())
        for name in ("spark-submit.sh", "main.py", "requirements.lock", "engine", "conf", "jobs"):
            (self.root / name).symlink_to(REPO / name)
        for entry in (REPO / ".venv").iterdir():
            if entry.name != ".stamp":
                (self.root / ".venv" / entry.name).symlink_to(entry)
        (self.root / ".venv" / ".stamp").write_text(stamp(self.root / "requirements.lock"))
        (self.root / "jvm-packages.txt").write_text(f"# one small artifact\n{COORDINATE}\n")

    @property
    def ivy(self) -> Path:
        return self.root / ".cache" / "ivy"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
        options = f"{env.get('JAVA_TOOL_OPTIONS', '')} -Duser.home={self.home}".strip()
        return {**env, "HOME": str(self.home), "JAVA_TOOL_OPTIONS": options, "ENGINE_CDS": "off"}

    def m2_pom(self, text: str) -> Path:
        """A POM of :data:`COORDINATE` in the home's local Maven repository, and no jar beside it."""
        folder = self.home / ".m2" / "repository" / GROUP.replace(".", "/") / ARTIFACT / VERSION
        folder.mkdir(parents=True)
        pom = folder / f"{ARTIFACT}-{VERSION}.pom"
        pom.write_text(text)
        return pom

    def set_up(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(self.root / "scripts" / "bootstrap.sh")],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=600,
        )

    def resolve_as_spark_does(self) -> subprocess.CompletedProcess[str]:
        """What the set-up did before: spark-submit's ``--packages`` with Spark's own settings."""
        noop = self.root / "noop.py"
        noop.write_text("pass\n")
        command = [str(REPO / ".venv" / "bin" / "spark-submit"), "--conf", f"spark.jars.ivy={self.ivy}"]
        env = {**self.env(), "PYSPARK_PYTHON": str(REPO / ".venv" / "bin" / "python")}
        return subprocess.run(
            [*command, "--packages", COORDINATE, str(noop)], env=env, capture_output=True, text=True, timeout=600
        )

    def jar(self) -> Path:
        return self.root / ".cache" / "jars" / f"{GROUP}_{ARTIFACT}-{VERSION}.jar"

    def home_files(self) -> list[str]:
        return sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*"))


def assert_set_up_from_central(tree: Tree, done: subprocess.CompletedProcess[str]) -> None:
    log = (tree.root / ".cache" / "resolve.log").read_text(errors="replace") if tree.ivy.exists() else ""
    assert done.returncode == 0, f"{done.stderr}\n--- resolve.log:\n{log[-4000:]}"
    assert hashlib.sha1(tree.jar().read_bytes()).hexdigest() == central(".jar.sha1").decode().split()[0]
    record = (tree.ivy / "cache" / GROUP / ARTIFACT / f"ivydata-{VERSION}.properties").read_text()
    assert ".m2" not in record and "local-m2-cache" not in record, "the cache records Maven Central alone"


def test_the_set_up_runs_no_job_and_leaves_the_users_home_alone(tmp_path: Path) -> None:
    """The rest of the set-up, with the JVM packages already there (this tree's, linked in): it
    runs no job (the class archive is written only by a run asked to, ``ENGINE_CDS=train``, not by
    a demo run of the set-up's: issue 59) and writes nothing in the user's home."""
    tree = Tree(tmp_path)
    (tree.root / "jvm-packages.txt").unlink()
    (tree.root / "jvm-packages.txt").symlink_to(REPO / "jvm-packages.txt")
    for folder in ("jars", "classpath"):
        (tree.root / ".cache" / folder).mkdir(parents=True)
        for jar in (REPO / ".cache" / folder).glob("*.jar"):
            (tree.root / ".cache" / folder / jar.name).symlink_to(jar)
    (tree.root / ".cache" / "jars" / ".stamp").write_text(
        stamp(tree.root / "jvm-packages.txt", tree.root / "requirements.lock")
    )
    done = subprocess.run(
        ["bash", str(tree.root / "scripts" / "bootstrap.sh")],
        env={k: v for k, v in tree.env().items() if k != "ENGINE_CDS"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # nothing to install, resolve or train
    assert not (tree.root / ".cache" / "cds").exists()
    assert tree.home_files() == [], "nothing written in the user's home"


def test_a_pom_without_its_jar_in_the_users_maven_repository_does_not_fail_the_first_set_up(tmp_path: Path) -> None:
    """Before the fix Spark's resolver found the POM in ``~/.m2``, failed on the missing jar, and
    the set-up exited 2. Nothing of the home is read or written now: it holds what it held."""
    tree = Tree(tmp_path)
    tree.m2_pom(central(".pom").decode())
    before = tree.home_files()
    done = tree.set_up()
    assert_set_up_from_central(tree, done)
    assert tree.home_files() == before, "nothing written in the user's home (no ~/.ivy2, ~/.cache)"


@pytest.mark.parametrize(
    "pom",
    [
        pytest.param("central", id="pom-as-central-has-it"),
        pytest.param("local-build", id="pom-of-a-local-build"),
    ],
)
def test_a_cache_poisoned_by_the_old_set_up_recovers_by_itself(tmp_path: Path, pom: str) -> None:
    """The old set-up (Spark's settings) failed on the POM in ``~/.m2`` and left the cache saying it
    had the module from there: every later set-up failed the same way, even once ``~/.m2`` was
    mended. The set-up now forgets what the cache had from elsewhere and resolves from Maven
    Central, with the POM still in ``~/.m2``. A POM of a local build that names a dependency
    Central has not is the case the project's settings alone would not mend (Ivy kept using the
    cached descriptor)."""
    tree = Tree(tmp_path)
    text = central(".pom").decode()
    if pom == "local-build":
        text = text.replace(
            "<dependencies>", f"<dependencies>{LOCAL_BUILD_DEPENDENCY}<version>1.0</version></dependency>", 1
        )
    tree.m2_pom(text)
    poisoned = tree.resolve_as_spark_does()
    assert poisoned.returncode != 0 and "local-m2-cache" in poisoned.stdout + poisoned.stderr, "the old set-up failed"
    done = tree.set_up()
    assert_set_up_from_central(tree, done)
    assert "from elsewhere than Maven Central" in done.stderr, "it says what it forgot"


def test_a_cache_whose_records_mislead_is_resolved_again_from_scratch(tmp_path: Path) -> None:
    """A cache damaged in a way its records do not show (here: a cached descriptor that names a
    dependency Maven Central has not, its record saying Central): the first resolution fails, the
    set-up forgets every record and resolves again, reusing the jar it had downloaded."""
    tree = Tree(tmp_path)
    first = tree.set_up()
    assert_set_up_from_central(tree, first)
    descriptor = tree.ivy / "cache" / GROUP / ARTIFACT / f"ivy-{VERSION}.xml"
    wrong = '<dependency org="org.example.local" name="only-here" rev="1.0" conf="compile->compile(*),master(*)"/>'
    descriptor.write_text(descriptor.read_text().replace("<dependencies>", f"<dependencies>{wrong}", 1))
    downloaded = tree.ivy / "cache" / GROUP / ARTIFACT / "jars" / f"{ARTIFACT}-{VERSION}.jar"
    kept = downloaded.stat().st_ino
    for stale in (tree.root / ".cache" / "jars").iterdir():
        stale.unlink()  # (so that the set-up resolves again)
    again = tree.set_up()
    assert "trying again with the Ivy cache's records forgotten" in again.stderr, again.stderr
    assert_set_up_from_central(tree, again)
    assert downloaded.stat().st_ino == kept, "the jar from Central was kept, not downloaded again"
