"""The driver JVM's class archive (JDK dynamic class-data sharing).

What it buys: the classes a run loads (Spark's, Delta's, the JDK's), parsed and verified once into
an archive that later driver JVMs map at start instead of loading them again: ~1.4-2 s off every
run's start (``bench/fixed_cost.py --compare-cds``), for ~180 MB in the cache and ~15 s once, as
the first run on a Java runtime and set of jars exits. Off switch: ``ENGINE_CDS=off``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import sys
from importlib import metadata, util
from pathlib import Path
from typing import Any


class ClassArchive:
    """The driver JVM's class archive (JDK dynamic CDS) in ``<cache>/cds/``: the classes a run
    loads (Spark's, Delta's, the JDK's), parsed and verified once, which later starts map instead
    of loading them again.

    Keyed by the Java runtime, Spark's version and the jars on the class path; a JVM for which it
    does not fit ignores it. Without one, this run trains it: the JVM writes it as it exits (~13 s
    once, ~180 MB; later runs take ~1.4-2 s less: ``bench/engine_command.py``), one run at a time
    (a lock; the others run without), kept only if the JVM exited by itself (:meth:`finish`).
    ``ENGINE_CDS=off``: no archive. Nothing here fails a run."""

    KEPT = 3
    """Archives kept (the most recently used): for as many runtimes or class paths in use."""

    def __init__(self, cache: Path, class_path: list[str], *, local_driver: bool = True) -> None:
        self.options: list[str] = []
        """The driver's JVM options for it."""
        self.training: Path | None = None
        self._lock: Any = None
        self.archive: Path | None = None
        off = os.environ.get("ENGINE_CDS", "on") == "off" or not local_driver  # a cluster's driver: not this JVM
        if off or any(c.isspace() for c in str(cache)) or (key := _archive_key(class_path)) is None:
            return  # spark-submit splits the driver's options at spaces
        folder = cache / "cds"
        self.archive = folder / f"{key}.jsa"
        if self._use():
            return
        if (folder / f"{key}.failed").exists():
            return  # this runtime wrote no archive when asked (no base archive?): do not ask every run
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._lock = open(folder / ".lock", "a")  # noqa: SIM115 (held until finish)
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a read-only cache, or another run is training: run without
            self._release()
            return
        if self._use():  # trained meanwhile
            self._release()
            return
        for left in folder.glob("*.tmp"):  # of a training killed with its wrapper: none runs now
            left.unlink(missing_ok=True)
        self.training = folder / f"{key}.jsa.{os.getpid()}.tmp"
        said = "writing the driver's class archive as this run ends (once, ~15 s): later runs start faster"
        print(f"[engine] {said} (ENGINE_CDS=off: no archive)", file=sys.stderr, flush=True)
        # Not the JVM's warnings about each class it cannot archive: hundreds of lines a run need not show.
        self.options = [f"-XX:ArchiveClassesAtExit={self.training}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

    def _use(self) -> bool:
        """Start on the archive if there is one (marked as used: the least recently used go)."""
        assert self.archive is not None
        if not self.archive.is_file():
            return False
        with contextlib.suppress(OSError):  # a read-only cache still serves it
            os.utime(self.archive)
        self.options = [f"-XX:SharedArchiveFile={self.archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
        return True

    def finish(self, code: int) -> None:
        """Keep what a training run wrote if its JVM exited by itself (``code`` >= 0, whatever the
        job's outcome), as the archive, beside the :attr:`KEPT` - 1 most recently used others; if
        it wrote none, say so for this key (``<key>.failed``), so later runs do not ask again."""
        if self.training is None or self.archive is None:
            return
        try:
            if code >= 0 and self.training.is_file() and self.training.stat().st_size > 0:
                self.training.replace(self.archive)
                archives = sorted(self.archive.parent.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
                for other in archives[self.KEPT :]:
                    other.unlink(missing_ok=True)
            elif code >= 0:
                self.archive.with_suffix(".failed").touch()
            self.training.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _archive_key(class_path: list[str]) -> str | None:
    """What a class archive fits: the Java runtime ``spark-submit`` starts (as it finds it), Spark's
    version and jars, and the class path's jars; ``None`` without Java."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.access(found, os.X_OK):
        return None
    java = Path(found).resolve()
    parts = [str(java), *(_stamp(p) for p in (java, java.parent.parent / "lib" / "server" / "libjvm.so"))]
    spark_jars = pyspark_dir() / "jars"
    parts += [metadata.version("pyspark"), str(spark_jars), *(_stamp(Path(j)) for j in class_path)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:-"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def pyspark_dir() -> Path:
    """The installed pyspark package's folder, found without importing pyspark (a launch would
    pay ~0.3 s for it)."""
    spec = util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("pyspark is not installed")
    return Path(spec.origin).resolve().parent
