"""The driver JVM's class archive (JDK dynamic class-data sharing).

What it buys: the classes a run loads (Spark's, Delta's, the JDK's), parsed and verified once into
an archive that later driver JVMs map at start instead of loading them again: the demo job 47 ->
37 s on two cores (``bench/fixed_cost.py --compare-cds``), for ~180 MB in the cache. Writing it
is an explicit step (``ENGINE_CDS=train``, which the test command takes once): the run that
writes it takes ~45-90 s longer (slower throughout, and ~30 s to dump as its JVM exits), too much
to charge a user's first run or every test whose class path differs. Off switch: ``ENGINE_CDS=off``.
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

    Keyed by the Java runtime, Spark's version and the jars on the class path. A run starts on the
    archive of its key, else on the most recently used one (the JVM maps it only if it fits, e.g.
    a class path with jars appended, and otherwise runs as without; its CDS log is off). It is
    written only when asked, ``ENGINE_CDS=train``: that run's JVM writes it as it exits, one run
    at a time (a lock; the others run without), kept only if the JVM exited by itself
    (:meth:`finish`). ``ENGINE_CDS=off``: no archive. Nothing here fails a run."""

    KEPT = 3
    """Archives kept (the most recently used): for as many runtimes or class paths in use."""

    def __init__(self, cache: Path, class_path: list[str], *, local_driver: bool = True) -> None:
        self.options: list[str] = []
        """The driver's JVM options for it."""
        self.training: Path | None = None
        self._lock: Any = None
        self.archive: Path | None = None
        mode = os.environ.get("ENGINE_CDS", "on")
        off = mode == "off" or not local_driver  # a cluster's driver: not this JVM
        if off or any(c.isspace() for c in str(cache)) or (key := _archive_key(class_path)) is None:
            return  # spark-submit splits the driver's options at spaces
        folder = cache / "cds"
        self.archive = folder / f"{key}.jsa"
        if mode != "train":
            self._use(self.archive if self.archive.is_file() else most_recent(folder))
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
        for left in folder.glob("*.tmp"):  # of a training killed with its wrapper: none runs now
            left.unlink(missing_ok=True)
        self.training = folder / f"{key}.jsa.{os.getpid()}.tmp"
        said = "writing the driver's class archive as this run ends (ENGINE_CDS=train): later runs start faster"
        print(f"[engine] {said}", file=sys.stderr, flush=True)
        # Not the JVM's warnings about each class it cannot archive: hundreds of lines a run need not show.
        self.options = [f"-XX:ArchiveClassesAtExit={self.training}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

    def _use(self, archive: Path | None) -> None:
        """Start on ``archive`` if there is one (marked as used: the least recently used go)."""
        if archive is None:
            return
        with contextlib.suppress(OSError):  # a read-only cache still serves it
            os.utime(archive)
        self.options = [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]

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


def most_recent(folder: Path) -> Path | None:
    """The most recently used archive in ``folder``, if any."""
    try:
        archives = [p for p in folder.glob("*.jsa") if p.is_file() and not p.is_symlink()]
        return max(archives, key=lambda p: p.stat().st_mtime, default=None)
    except OSError:
        return None


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
