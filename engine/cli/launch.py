"""The launcher: the ``engine`` command of an installed engine, and what ``spark-submit.sh`` hands
over to in a source tree once it is set up (one implementation of both).

``engine job=<path> [key=value ...]`` runs the job under pyspark's own ``spark-submit``:
recognised spark-submit options (``--master``, ``--conf k=v``, ``--jars``, ...) go to spark-submit,
the rest to Hydra. What it needs comes from the source tree's ``.cache`` when it runs from one
(:func:`in_source_tree`), else from elsewhere:

- the JVM jars: ``$ENGINE_JARS`` (jars or directories of jars, comma-separated; the class-path ones,
  the S3 connector, ``$ENGINE_CLASS_PATH``), else the source tree's ``.cache/jars`` and
  ``.cache/classpath`` when the engine runs from one, else resolved once, like
  ``scripts/bootstrap.sh`` does, from the packaged ``jvm-packages.txt`` into the user cache
  (``$ENGINE_CACHE``, else ``$XDG_CACHE_HOME/engine`` or ``~/.cache/engine``; needs Maven Central once);
- the engine for executors: a zip of the installed package in the user cache (``--py-files``),
  rebuilt when a module changes;
- the driver: a two-line script in the user cache calling :func:`engine.cli.entry.driver_main`;
- jobs: ``$ENGINE_JOBS_DIR``, else ``./jobs``; ``conf/`` and ``log4j2.properties``: the packaged copy;
- the driver JVM's class archive (JDK dynamic CDS, :class:`ClassArchive`): a run with
  ``ENGINE_CDS=train`` writes it into the cache as it exits, later ones start on it
  (``ENGINE_CDS=off``: none).

Signals are handled as the wrapper handles them (:mod:`engine.cli.signals`): spark-submit starts
with SIGINT and SIGTERM ignored and the ones this process gets go to the Python driver (found with
``pgrep``, else ``/proc``) once it catches them; until then they are held, and past
:data:`STOP_GRACE_SECONDS` spark-submit is killed (:class:`StopRelay`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import engine
from engine.cli.jvm_packages import ResolutionFailed, resolve
from engine.cli.jvm_watch import JVM_PID_ENV
from engine.cli.stop_relay import StopRelay
from engine.config.paths import conf_dir, jobs_root, packaged_file
from engine.config.secrets import key_command
from engine.platform.class_archive import ClassArchive, pyspark_dir
from engine.platform.jvm_temp import java_tmpdir_options

__all__ = ["main", "split_args"]

PACKAGE = Path(engine.__file__).resolve().parent
SOURCE_TREE = PACKAGE.parent
REPO_MAIN = SOURCE_TREE / "main.py"
"""The driver a source tree submits (``spark-submit.sh``'s, as before the launchers were one)."""
WITH_VALUE = (
    *("--conf", "--deploy-mode", "--name", "--files", "--archives", "--properties-file", "--queue"),
    *("--executor-memory", "--executor-cores", "--num-executors", "--total-executor-cores", "--driver-cores"),
    *("--driver-library-path", "--principal", "--keytab"),
    *("--packages", "--repositories", "--exclude-packages", "--py-files"),
)
"""spark-submit options taking a value, passed through as they are (as ``spark-submit.sh`` does)."""
FLAGS = ("--verbose", "--supervise")
DRIVER = "from engine.cli.entry import driver_main\n\ndriver_main()\n"


def split_args(argv: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """``(the options this command sets itself, spark-submit's other options, Hydra's arguments)``."""
    own: dict[str, str] = {}
    spark: list[str] = []
    hydra: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--master", "--driver-memory", "--jars", "--driver-class-path", "--driver-java-options"):
            given = value if eq else (args.pop(0) if args else "")
            own[name] = f"{own[name]} {given}" if name == "--driver-java-options" and name in own else given
        elif name in WITH_VALUE:
            spark += [arg] if eq else [arg, args.pop(0) if args else ""]
        elif arg in FLAGS:
            spark.append(arg)
        else:
            hydra.append(arg)
    return own, spark, hydra


def cache_dir() -> Path:
    """Where the launcher keeps the engine's zip, the driver script and the class archive:
    ``$ENGINE_CACHE``, else the source tree's ``.cache`` once ``scripts/bootstrap.sh`` set it up
    (``spark-submit.sh``: nothing of the user's home is used), else the user cache."""
    env = os.environ.get("ENGINE_CACHE")
    if env:
        base = Path(env)
    elif in_source_tree():
        base = SOURCE_TREE / ".cache"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "engine"
    base.mkdir(parents=True, exist_ok=True)
    return base


def in_source_tree() -> bool:
    """Whether the engine runs from a source tree ``scripts/bootstrap.sh`` set up (its jars resolved)."""
    return (SOURCE_TREE / ".cache" / "jars" / ".stamp").exists()


def app_script(cache: Path) -> Path:
    """What spark-submit runs: ``$ENGINE_APP`` (another Python file submitted the same way: the
    benches' empty and hand-written apps), else the source tree's ``main.py``, else a two-line
    driver script in the cache."""
    env = os.environ.get("ENGINE_APP")
    if env:
        return Path(env)
    return REPO_MAIN if in_source_tree() and REPO_MAIN.is_file() else driver_script(cache)


def engine_jars(cache: Path) -> list[str]:
    """The JVM jars shipped with ``--jars``: ``$ENGINE_JARS``, the source tree's cache, or the user
    cache (resolved once)."""
    return _jars("ENGINE_JARS", "jars", cache, lambda resolved: resolved)


def engine_class_path(cache: Path) -> list[str]:
    """The jars put on the JVMs' class path at start (the S3 connector and its SDK, marked
    ``classpath`` in ``jvm-packages.txt``): ``$ENGINE_CLASS_PATH``, the source tree's cache, or the
    user cache (resolved once, with the others)."""
    return _jars("ENGINE_CLASS_PATH", "classpath", cache, lambda resolved: resolved / "classpath")


def driver_class_path(own: dict[str, str], cache: Path) -> list[str]:
    """The driver's class path: the engine's class-path jars, then the user's ``--driver-class-path``."""
    return [*engine_class_path(cache), *filter(None, own.get("--driver-class-path", "").split(":"))]


def _jars(variable: str, tree_dir: str, cache: Path, resolved_dir: Callable[[Path], Path]) -> list[str]:
    env = os.environ.get(variable, "")
    if env:
        found: list[str] = []
        for item in filter(None, (p.strip() for p in env.split(","))):
            path = Path(item)
            found += sorted(str(j) for j in path.glob("*.jar")) if path.is_dir() else [str(path)]
        return found
    if in_source_tree():
        return sorted(str(j) for j in (SOURCE_TREE / ".cache" / tree_dir).glob("*.jar"))
    return sorted(str(j) for j in resolved_dir(_resolved(cache)).glob("*.jar"))


def _coordinates() -> list[tuple[str, bool]]:
    """``jvm-packages.txt``'s Maven coordinates, each with whether it goes on the class path."""
    text = packaged_file("jvm-packages.txt").read_text()
    found = []
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            found.append((words[-1], words[0] == "classpath"))
    return found


def _resolved(cache: Path) -> Path:
    """Resolve the packaged Maven coordinates with spark-submit's Ivy into the user cache, once per
    set of coordinates and Spark version (only the listed jars: see ``jvm-packages.txt``): the
    shipped jars in the directory returned, the class-path ones in its ``classpath/``."""
    import pyspark

    coords = _coordinates()
    key = hashlib.sha256("\n".join([*(f"{c} {cp}" for c, cp in coords), pyspark.__version__]).encode()).hexdigest()[:16]
    jars_dir = cache / f"jars-{key}"
    if not (jars_dir / ".done").exists():
        print(f"[engine] resolving JVM packages into {jars_dir} (once)", file=sys.stderr, flush=True)
        try:  # from Maven Central alone, never ~/.m2 (engine/cli/jvm_packages.py)
            resolve([c for c, _ in coords], cache / "ivy", cache / "resolve.log")
        except ResolutionFailed as exc:
            sys.exit(f"[engine] JVM package resolution failed: {exc}\n(or set ENGINE_JARS)")
        staging = Path(tempfile.mkdtemp(dir=cache))
        (staging / "classpath").mkdir()
        for coord, on_class_path in coords:
            group, artifact, version = coord.split(":")
            jar = cache / "ivy" / "jars" / f"{group}_{artifact}-{version}.jar"
            into = staging / "classpath" if on_class_path else staging
            try:
                os.link(jar, into / jar.name)  # the SDK bundle is large: no second copy when it can be
            except OSError:
                shutil.copy(jar, into)
        (staging / ".done").touch()
        publish_jars(staging, jars_dir)
    return jars_dir


def publish_jars(staging: Path, jars_dir: Path) -> None:
    """Put the resolved jars of ``staging`` (complete: it holds ``.done``) at ``jars_dir`` by one
    rename, under a lock file beside it, so concurrent first runs publish one after the other. A run
    that finds ``jars_dir`` complete discards its ``staging``: a completed ``jars_dir`` is never
    removed (another run may be listing it). Only a leftover without ``.done`` (a run killed while
    publishing or removing one) is removed and replaced."""
    with open(jars_dir.parent / f".{jars_dir.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (jars_dir / ".done").exists():
            shutil.rmtree(staging, ignore_errors=True)
            return
        shutil.rmtree(jars_dir, ignore_errors=True)
        staging.rename(jars_dir)


def engine_zip(cache: Path) -> Path:
    """The installed package's modules as a zip for executors, named by their content's digest."""
    modules = sorted(PACKAGE.rglob("*.py"))
    digest = hashlib.sha256()
    for path in modules:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    target = cache / f"engine-{engine.__version__}-{digest.hexdigest()[:12]}.zip"
    if target.exists():
        with contextlib.suppress(OSError):  # in use: not pruned (a read-only cache still serves it)
            os.utime(target)
    else:
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for path in modules:
                z.write(path, Path("engine") / path.relative_to(PACKAGE))
        tmp.replace(target)
        _prune_zips(cache, target)
    return target


ZIP_KEPT_SECONDS = 3600.0
"""How long a zip of the engine's earlier modules stays: a run started on it may still be shipping it."""


def _prune_zips(cache: Path, current: Path) -> None:
    """Zips of earlier modules (each edit of a source tree makes one) unused for :data:`ZIP_KEPT_SECONDS`, removed."""
    now = time.time()
    for old in cache.glob("engine-*.zip"):
        with contextlib.suppress(OSError):
            if old != current and now - old.stat().st_mtime > ZIP_KEPT_SECONDS:
                old.unlink()


def driver_script(cache: Path) -> Path:
    path = cache / "driver.py"
    if not path.exists() or path.read_text() != DRIVER:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(DRIVER)
        tmp.replace(path)
    return path


def _spark_submit() -> str:
    return str(pyspark_dir() / "bin" / "spark-submit")


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.update(extra)
    return env


def _deploy_mode(argv: list[str]) -> str:
    """``--deploy-mode``'s value among spark-submit's options (``client`` when not given)."""
    _, spark, _ = split_args(argv)
    for i, arg in enumerate(spark):
        name, eq, value = arg.partition("=")
        if name == "--deploy-mode":
            return value if eq else (spark[i + 1] if i + 1 < len(spark) else "")
    return "client"


def command(argv: list[str], cache: Path, *, archive: ClassArchive | None = None) -> list[str]:
    """The spark-submit command line for ``argv``; ``archive``: the driver's class archive."""
    own, spark, hydra = split_args(argv)
    jars = engine_jars(cache) + ([own["--jars"]] if own.get("--jars") else [])
    class_path = ":".join(driver_class_path(own, cache))
    log4j = f"-Dlog4j2.configurationFile=file:{conf_dir() / 'log4j2.properties'}"
    java = " ".join([log4j, *java_tmpdir_options(), *(archive.options if archive else [])])
    return [
        _spark_submit(),
        "--master",
        own.get("--master") or os.environ.get("ENGINE_MASTER", "local[*]"),
        "--driver-memory",
        own.get("--driver-memory") or os.environ.get("ENGINE_DRIVER_MEMORY", "4g"),
        *(["--jars", ",".join(jars)] if jars else []),
        *(
            ["--driver-class-path", class_path, "--conf", f"spark.executor.extraClassPath={class_path}"]
            if class_path
            else []
        ),
        "--driver-java-options",
        f"{java} {own['--driver-java-options']}" if own.get("--driver-java-options") else java,
        "--py-files",
        str(engine_zip(cache)),
        "--conf",
        "spark.ui.showConsoleProgress=false",
        *spark,
        str(app_script(cache)),
        *hydra,
    ]


def _ignore_stop_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> NoReturn:
    args = sys.argv[1:] if argv is None else argv
    if (done := key_command(args)) is not None:  # mode=new_key, mode=encrypt: no job, no JVM
        sys.exit(done)
    cache = cache_dir()
    own, _, _ = split_args(args)
    archive = ClassArchive(cache, driver_class_path(own, cache), local_driver="cluster" not in _deploy_mode(args))
    cmd = command(args, cache, archive=archive)
    env = _env({"ENGINE_WRAPPER_PID": str(os.getpid()), **({"ENGINE_TTY": "1"} if sys.stdout.isatty() else {})})
    # The driver imports the engine from the --py-files zip (spark-submit puts it first on the
    # path), where no data file is: it gets the installed package's conf/ and this jobs/ by name.
    env.setdefault("ENGINE_CONF_DIR", str(conf_dir()))
    env.setdefault("ENGINE_JOBS_DIR", str(jobs_root()))
    script = str(app_script(cache))
    # The JVM is the shell that execs spark-submit (which execs the JVM): its pid is known before the
    # driver starts, and the driver watches it (engine/cli/jvm_watch.py).
    child = subprocess.Popen(
        ["/bin/sh", "-c", f'{JVM_PID_ENV}=$$; export {JVM_PID_ENV}; exec "$@"', "spark-submit", *cmd],
        env=env,
        preexec_fn=_ignore_stop_signals,
    )
    relay = StopRelay(child, script)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, relay.handle)
    code = child.wait()
    archive.finish(code)
    relay.join(timeout=1.0)
    sys.exit(relay.exit_status(code))


if __name__ == "__main__":  # spark-submit.sh hands over here
    main()
