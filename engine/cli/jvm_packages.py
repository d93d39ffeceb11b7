"""Resolving the engine's JVM packages from Maven Central into the project's own Ivy cache.

The set-up resolves ``jvm-packages.txt`` once with spark-submit's Ivy (``--packages``). With
Spark's default settings that resolver looks in the local Maven repository first:
``~/.m2/repository`` under Java's ``user.home``, which is the passwd entry's home, not ``$HOME``.
A POM there without its jar (what ``mvn dependency:get`` of a POM or an interrupted Maven build
leaves) failed the resolution, and the Ivy cache then recorded that module as found there, so the
set-up kept failing after ``~/.m2`` was fixed. So:

- the resolution uses the project's settings, ``conf/ivysettings.xml`` (``spark.jars.ivySettings``):
  Maven Central and the cache ``spark.jars.ivy`` names, nothing of the user's home;
- before resolving, each module revision the cache records as fetched from anywhere but Maven
  Central (its ``ivydata-<rev>.properties`` names another location: a ``~/.m2``, spark-packages)
  is forgotten: its descriptor, its record and those of its files that did not come from Central;
- a resolution that fails all the same (a cache damaged some other way) is tried once more with
  every module forgotten. Files downloaded from Central are kept: Ivy checked their checksums as it
  downloaded them (to a temporary name, renamed when complete), and reuses a file it finds in the
  cache, so the retry downloads the descriptors again, not the jars.

One resolution at a time per cache (a lock beside it). Used by ``scripts/bootstrap.sh`` (``python
-m engine.cli.jvm_packages``) and the ``engine`` command's first run (:mod:`engine.cli.launch`).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.config.paths import packaged_file

__all__ = ["CENTRAL", "ResolutionFailed", "forget_all", "forget_foreign", "resolve"]

CENTRAL = "https://repo1.maven.org/maven2/"
"""Maven Central, the one repository of ``conf/ivysettings.xml``."""
RECORD_PREFIX, RECORD_SUFFIX = "ivydata-", ".properties"


class ResolutionFailed(Exception):
    """The JVM packages did not resolve, also after forgetting the cache's records; the message
    ends with the resolver's last lines."""


def settings_file() -> Path:
    return packaged_file("conf") / "ivysettings.xml"


def resolve(coordinates: Sequence[str], ivy: Path, log: Path, *, say: Callable[[str], None] | None = None) -> None:
    """Resolve ``coordinates`` (``group:artifact:version``) with their dependencies into ``ivy``
    (``<ivy>/jars/<group>_<artifact>-<version>.jar``), the resolver's output in ``log``; ``say``
    tells what it does about the cache (by default on stderr)."""
    say = say or _to_stderr
    ivy.mkdir(parents=True, exist_ok=True)
    with open(ivy.parent / f".{ivy.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        log.write_text("")
        forgotten = forget_foreign(ivy)
        if forgotten:
            say(
                f"forgot {len(forgotten)} module(s) the Ivy cache had from elsewhere than Maven Central: {forgotten[0]}"
            )
        if _submit(coordinates, ivy, log) == 0:
            return
        say(f"JVM package resolution failed; trying again with the Ivy cache's records forgotten (see {log})")
        forget_all(ivy)
        if _submit(coordinates, ivy, log) == 0:
            return
    raise ResolutionFailed(f"the JVM packages did not resolve (see {log}):\n{_tail(log)}")


def _to_stderr(text: str) -> None:
    print(f"[engine] {text}", file=sys.stderr, flush=True)


def _submit(coordinates: Sequence[str], ivy: Path, log: Path) -> int:
    """One resolution: spark-submit with ``--packages`` and a Python file that does nothing."""
    import pyspark

    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        noop = Path(tmp) / "noop.py"
        noop.write_text("pass\n")
        command = [
            str(submit),
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--conf",
            f"spark.jars.ivySettings={settings_file()}",
        ]
        with open(log, "a") as out:
            done = subprocess.run(
                [*command, "--packages", ",".join(coordinates), str(noop)], stdout=out, stderr=out, env=env
            )
    return done.returncode


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- the cache's records ------------------------------------------------------------------------


def forget_foreign(ivy: Path) -> list[str]:
    """Forget each module revision of ``<ivy>/cache`` that its record says was fetched from
    elsewhere than Maven Central (or says nothing of where); the revisions forgotten
    (``group#module;revision``)."""
    forgotten = []
    for record in _records(ivy):
        origins = _locations(record)
        if not origins or any(not origin.startswith(CENTRAL) for origin in origins):
            _forget(ivy, record)
            forgotten.append(_revision(record))
    return forgotten


def forget_all(ivy: Path) -> None:
    """Forget every module revision of ``<ivy>/cache``, and Ivy's leftover resolution files: keep
    only the files that came from Maven Central (the copies retrieved from the cache into
    ``<ivy>/jars`` are made again)."""
    cache = ivy / "cache"
    kept: dict[Path, set[str]] = {}
    for record in _records(ivy):
        kept.setdefault(record.parent, set()).update(_central_files(record))
        _forget(ivy, record)
    for module in {p.parent.parent for p in cache.glob("*/*/*s/*")}:
        for file in module.glob("*s/*"):
            if file.is_file() and file.name not in kept.get(module, set()):
                file.unlink()  # no record says where it came from
    for leftover in [*cache.glob("resolved-*"), *cache.glob("*-default.xml")]:
        leftover.unlink(missing_ok=True)
    shutil.rmtree(ivy / "jars", ignore_errors=True)


def _records(ivy: Path) -> list[Path]:
    """Each module revision's record: ``<ivy>/cache/<group>/<module>/ivydata-<revision>.properties``."""
    return sorted((ivy / "cache").glob(f"*/*/{RECORD_PREFIX}*{RECORD_SUFFIX}"))


def _forget(ivy: Path, record: Path) -> None:
    """Drop a revision's descriptor, record, and its files (and their retrieved copies) that did
    not come from Maven Central."""
    revision = record.name[len(RECORD_PREFIX) : -len(RECORD_SUFFIX)]
    module = record.parent
    central = _central_files(record)
    for name in {Path(origin).name for origin in _locations(record)} - central:
        for file in module.glob(f"*s/{name}"):
            file.unlink(missing_ok=True)
        (ivy / "jars" / f"{module.parent.name}_{name}").unlink(missing_ok=True)
    for name in (f"ivy-{revision}.xml", f"ivy-{revision}.xml.original", record.name):
        (module / name).unlink(missing_ok=True)


def _central_files(record: Path) -> set[str]:
    return {Path(origin).name for origin in _locations(record) if origin.startswith(CENTRAL)}


def _revision(record: Path) -> str:
    revision = record.name[len(RECORD_PREFIX) : -len(RECORD_SUFFIX)]
    return f"{record.parent.parent.name}#{record.parent.name};{revision}"


def _locations(record: Path) -> list[str]:
    """Where the record says the revision's descriptor and files were fetched from."""
    return [value for key, value in _properties(record).items() if key.endswith(".location")]


def _properties(path: Path) -> dict[str, str]:
    """A Java properties file as Ivy writes its records (``key=value``, ``\\``-escaped, ``#`` comments)."""
    found: dict[str, str] = {}
    try:
        text = path.read_text(encoding="latin-1")
    except OSError:
        return found
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, value = _split_property(line)
        found[key] = value
    return found


def _split_property(line: str) -> tuple[str, str]:
    """``key=value`` of one line, the backslash escapes undone (``\\:`` ``\\#`` ``\\=``)."""
    key: list[str] = []
    chars = iter(line.lstrip())
    for char in chars:
        if char == "\\":
            key.append(next(chars, ""))
        elif char in "=:":
            break
        else:
            key.append(char)
    value: list[str] = []
    for char in chars:
        value.append(next(chars, "") if char == "\\" else char)
    return "".join(key), "".join(value).strip()


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.cli.jvm_packages --ivy DIR --log FILE COORDINATE ...`` (scripts/bootstrap.sh)."""
    parser = argparse.ArgumentParser(prog="engine.cli.jvm_packages")
    parser.add_argument("--ivy", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--label", default="[engine]")
    parser.add_argument("coordinates", nargs="+")
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        print(f"{args.label} {text}", file=sys.stderr, flush=True)

    try:
        resolve(args.coordinates, args.ivy, args.log, say=say)
    except ResolutionFailed as exc:
        say(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
