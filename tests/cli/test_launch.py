"""The ``engine`` command (engine.cli.launch) without starting Spark: its spark-submit line, how stop
signals reach the driver (held until it can take them), and how concurrent first runs publish the
resolved JVM jars."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.cli import launch, stop_relay
from engine.platform import class_archive


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
    monkeypatch.setenv("ENGINE_CLASS_PATH", "/opt/s3/aws.jar")
    argv = ["--master", "local[2]", "--jars", "u.jar", "--driver-class-path", "/u/c.jar", "job=demo/orders"]
    cmd = launch.command(argv, tmp_path)
    assert cmd[0].endswith("/bin/spark-submit")
    assert cmd[cmd.index("--master") + 1] == "local[2]"
    assert cmd[cmd.index("--jars") + 1] == f"{jars}/a.jar,{jars}/b.jar,/opt/extra.jar,u.jar"
    assert cmd[cmd.index("--driver-class-path") + 1] == "/opt/s3/aws.jar:/u/c.jar", "the user's come after"
    assert "spark.executor.extraClassPath=/opt/s3/aws.jar:/u/c.jar" in cmd
    assert "log4j2.properties" in cmd[cmd.index("--driver-java-options") + 1]
    zipped = Path(cmd[cmd.index("--py-files") + 1])
    names = zipfile.ZipFile(zipped).namelist()
    assert "engine/cli/entry.py" in names and "engine/__init__.py" in names
    assert all(n.endswith(".py") for n in names)
    driver = Path(cmd[-2])
    assert driver == launch.REPO_MAIN if launch.in_source_tree() else driver.read_text() == launch.DRIVER
    assert cmd[-1] == "job=demo/orders"
    monkeypatch.setenv("ENGINE_APP", str(tmp_path / "app.py"))
    assert launch.command(["job=x"], tmp_path)[-2] == str(tmp_path / "app.py"), "ENGINE_APP is submitted instead"
    monkeypatch.delenv("ENGINE_APP")
    again = launch.command(["job=x"], tmp_path)
    assert again[again.index("--py-files") + 1] == str(zipped), "unchanged modules: the same zip, not rebuilt"
    assert len(list(tmp_path.glob("engine-*.zip"))) == 1


# -- stop signals reach the Python driver (pgrep, else /proc) once it catches them, else end spark-submit

DRIVER_LIKE = """
import os, signal, sys, time
late = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
print("ready", flush=True)
time.sleep(late)  # meanwhile SIGINT stays ignored, as the JVM left it
signal.signal(signal.SIGINT, lambda *_: sys.exit(42))
jvm = os.getppid()
while os.getppid() == jvm:
    time.sleep(0.1)
"""
"""Stands for the Python driver: it starts with SIGINT ignored (inherited from the JVM), says it is
ready, sets its handler ``argv[2]`` seconds later (0 by default), then stops (exit 42) on SIGINT,
and when its JVM is gone."""
JVM_LIKE = "import signal, subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
"""Stands for the JVM: runs the driver as its child, exits with its status."""


def _ignore_stops() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


@pytest.fixture
def script(tmp_path: Path) -> str:
    """A driver script path with characters that mean something in a regular expression."""
    where = tmp_path / "c++ [cache] (1)" / "driver.py"
    where.parent.mkdir()
    return str(where)


@contextlib.contextmanager
def jvm_running(script: str, *driver_args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process ignoring SIGINT/SIGTERM (as spark-submit starts) whose child is a driver running
    ``script`` (with ``driver_args``)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", JVM_LIKE, sys.executable, "-c", DRIVER_LIKE, script, *driver_args],
        preexec_fn=_ignore_stops,
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None and parent.stdout.readline() == b"ready\n"
    try:
        yield parent
    finally:
        with contextlib.suppress(ProcessLookupError):
            parent.kill()  # not yet waited for, so the pid is still this process's
        parent.wait()
        parent.stdout.close()


@pytest.fixture
def jvm(script: str) -> Iterator[subprocess.Popen[bytes]]:
    with jvm_running(script) as parent:
        yield parent


@pytest.mark.parametrize(
    "lookup",
    [pytest.param(stop_relay._drivers_by_pgrep, id="pgrep"), pytest.param(stop_relay._drivers_by_proc, id="proc")],
)
def test_the_driver_lookup_finds_the_child_running_the_driver_script(
    jvm: subprocess.Popen[bytes], script: str, lookup: Callable[[int, str], list[int] | None]
) -> None:
    (driver,) = lookup(jvm.pid, script) or [None]
    assert driver is not None and f"{script}".encode() in Path(f"/proc/{driver}/cmdline").read_bytes()
    assert lookup(jvm.pid, script.replace("driver.py", "driverXpy")) == [], "the path matches literally"
    assert lookup(driver, script) == [], "only the given process's children"


def test_without_pgrep_the_driver_is_found_in_proc(
    jvm: subprocess.Popen[bytes], script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no pgrep on it
    assert stop_relay._drivers_by_pgrep(jvm.pid, script) is None
    assert stop_relay._drivers(jvm.pid, script) == stop_relay._drivers_by_proc(jvm.pid, script) != []


def test_a_stop_signal_goes_to_the_driver_which_stops_and_the_jvm_with_it(
    jvm: subprocess.Popen[bytes], script: str
) -> None:
    relay = stop_relay.StopRelay(jvm, script)
    relay.handle(signal.SIGINT)
    code = jvm.wait(timeout=20)
    assert code == 42, "the driver got SIGINT and stopped its own way; the JVM ended with it"
    assert relay.exit_status(code) == 42 and relay.killed_for is None


def test_a_stop_before_the_driver_catches_it_is_held_and_delivered_once_it_does(script: str) -> None:
    """The driver starts with the JVM's ignored SIGINT and sets its handler a second later: a stop
    sent meanwhile was lost (the run went on), now it is held until the driver takes it."""
    with jvm_running(script, "1.0") as parent:
        relay = stop_relay.StopRelay(parent, script, grace=20)
        relay.handle(signal.SIGINT)
        assert parent.wait(timeout=20) == 42, "the driver got the stop once it could take it"
        assert relay.killed_for is None


def test_with_no_driver_a_held_stop_ends_spark_submit_after_the_grace(script: str) -> None:
    """Before the first fix nothing happened: spark-submit ignores SIGINT/SIGTERM and there was no
    driver. A stop no driver takes ends spark-submit once held for the grace period."""
    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=_ignore_stops)
    try:
        relay = stop_relay.StopRelay(starting, script, grace=0.5)
        relay.handle(signal.SIGINT)
        code = starting.wait(timeout=20)
        assert code == -signal.SIGKILL and relay.exit_status(code) == 128 + signal.SIGINT
    finally:
        with contextlib.suppress(ProcessLookupError):
            starting.kill()
        starting.wait()


def test_a_signal_that_comes_while_the_handler_runs_is_taken_too(script: str) -> None:
    """Python runs a signal's handler between two bytecodes of the main thread, so a second signal
    can run it inside the first: it must not wait for itself (the handler's lock is re-entrant)."""
    ending = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"], preexec_fn=_ignore_stops)
    relay = stop_relay.StopRelay(ending, script, grace=20)

    def nested() -> None:
        with relay._lock:  # the first signal's handler, interrupted by a second
            relay.handle(signal.SIGTERM)

    inside = threading.Thread(target=nested, daemon=True)
    inside.start()
    inside.join(timeout=5)
    assert not inside.is_alive(), "the handler waited for itself"
    assert ending.wait(timeout=20) == 0
    relay.join(timeout=5)


def test_a_spark_submit_that_ends_while_a_stop_is_held_keeps_its_exit_status(script: str) -> None:
    """A stop held for a driver that never comes, while spark-submit ends by itself (its driver had
    finished): not killed, its own exit status stands (the run was not stopped)."""
    ending = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"], preexec_fn=_ignore_stops)
    relay = stop_relay.StopRelay(ending, script, grace=20)
    relay.handle(signal.SIGTERM)
    code = ending.wait(timeout=20)
    relay.join(timeout=5)
    assert code == 0 and relay.exit_status(code) == 0 and relay.killed_for is None


# -- the first resolution of the JVM jars: concurrent runs publish one complete directory


def _staging(cache: Path, *jars: str) -> Path:
    staging = Path(tempfile.mkdtemp(dir=cache))
    for name in jars:
        (staging / name).write_text(name)
    (staging / ".done").touch()
    return staging


def test_a_second_publisher_keeps_the_published_jars_and_discards_its_own(tmp_path: Path) -> None:
    jars_dir = tmp_path / "jars-key"
    launch.publish_jars(_staging(tmp_path, "a.jar", "b.jar"), jars_dir)
    first = jars_dir.stat().st_ino
    late = _staging(tmp_path, "a.jar", "b.jar")
    launch.publish_jars(late, jars_dir)  # before the fix: rmtree of the first run's directory
    assert jars_dir.stat().st_ino == first, "the completed directory was not removed nor replaced"
    assert sorted(p.name for p in jars_dir.iterdir()) == [".done", "a.jar", "b.jar"]
    assert not late.exists() and sorted(p.name for p in tmp_path.iterdir()) == [".jars-key.lock", "jars-key"]


def test_a_leftover_without_done_is_replaced(tmp_path: Path) -> None:
    jars_dir = tmp_path / "jars-key"
    jars_dir.mkdir()
    (jars_dir / "a.jar").write_text("half removed")
    launch.publish_jars(_staging(tmp_path, "a.jar", "b.jar"), jars_dir)
    assert sorted(p.name for p in jars_dir.iterdir()) == [".done", "a.jar", "b.jar"]
    assert (jars_dir / "a.jar").read_text() == "a.jar"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".jars-key.lock", "jars-key"]


@pytest.mark.parametrize("leftover", [pytest.param(False, id="first-run"), pytest.param(True, id="over-a-leftover")])
def test_concurrent_publishers_each_then_list_the_complete_jars(tmp_path: Path, leftover: bool) -> None:
    for attempt in range(30):
        cache = tmp_path / str(attempt)
        cache.mkdir()
        jars_dir = cache / "jars-key"
        if leftover:
            jars_dir.mkdir()
            (jars_dir / "a.jar").write_text("half removed")
        stagings = [_staging(cache, "a.jar", "b.jar") for _ in range(3)]
        start = threading.Barrier(len(stagings))

        def publish(staging: Path, jars_dir: Path = jars_dir, start: threading.Barrier = start) -> list[str]:
            start.wait()
            launch.publish_jars(staging, jars_dir)
            return sorted(p.name for p in jars_dir.iterdir())

        with ThreadPoolExecutor(len(stagings)) as pool:
            listed = list(pool.map(publish, stagings))
        assert listed == [[".done", "a.jar", "b.jar"]] * len(stagings), f"attempt {attempt}"
        left = sorted(p.name for p in cache.iterdir())
        assert left == [".jars-key.lock", "jars-key"], "every other staging was discarded"


def test_a_run_asked_to_trains_the_driver_class_archive_and_later_runs_map_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a real JVM: no run writes an archive unasked; one with ``ENGINE_CDS=train`` does as
    its JVM exits (one run at a time; a run killed by a signal keeps nothing), and the next JVM
    maps it (``-Xshare:on`` fails a JVM that cannot), as does a run on another class path."""
    import os
    import shutil

    monkeypatch.delenv("ENGINE_CDS", raising=False)
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "the tests need Java"
    unasked = class_archive.ClassArchive(tmp_path, [])
    assert (unasked.options, unasked.training) == ([], None), "no archive, none asked for: none written"
    assert not (tmp_path / "cds").exists()

    monkeypatch.setenv("ENGINE_CDS", "train")
    killed = class_archive.ClassArchive(tmp_path, [])
    assert killed.training is not None and f"-XX:ArchiveClassesAtExit={killed.training}" in killed.options
    killed.finish(-signal.SIGKILL)
    assert killed.archive is not None and not killed.archive.exists()

    first = class_archive.ClassArchive(tmp_path, [])
    assert first.training is not None, "the lock was released: this run trains"
    meanwhile = class_archive.ClassArchive(tmp_path, [])
    assert (meanwhile.options, meanwhile.training) == ([], None), "another run trains: this one runs without"
    trained = subprocess.run([java, *first.options, "-version"], capture_output=True, text=True, timeout=120)
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout == "", "the JVM's own messages stay off stdout (the run's summary is there)"
    first.finish(trained.returncode)
    assert first.archive is not None and first.archive.stat().st_size > 0 and not first.training.exists()

    monkeypatch.delenv("ENGINE_CDS")
    later = class_archive.ClassArchive(tmp_path, [])
    assert later.training is None and f"-XX:SharedArchiveFile={first.archive}" in later.options
    mapped = subprocess.run([java, "-Xshare:on", *later.options, "-version"], capture_output=True, text=True)
    assert mapped.returncode == 0, mapped.stderr
    cmd = launch.command(["job=x"], tmp_path, archive=later)
    assert f"-XX:SharedArchiveFile={first.archive}" in cmd[cmd.index("--driver-java-options") + 1]

    other = [str(tmp_path / "other.jar")]  # another class path: the most recent archive, which the JVM checks
    appended = class_archive.ClassArchive(tmp_path, other)
    assert appended.training is None and f"-XX:SharedArchiveFile={first.archive}" in appended.options
    extended = subprocess.run(
        [java, "-Xshare:on", *appended.options, "-cp", other[0], "-version"], capture_output=True, text=True
    )
    assert extended.returncode == 0, extended.stderr  # a class path with a jar appended still maps it
    monkeypatch.setenv("ENGINE_CDS", "train")
    silent = class_archive.ClassArchive(tmp_path, other)
    assert silent.training is not None
    silent.finish(0)  # its JVM exited by itself yet wrote nothing: later runs do not ask again
    assert class_archive.ClassArchive(tmp_path, other).training is None
    assert class_archive.ClassArchive(tmp_path, [], local_driver=False).options == [], "a cluster's driver is elsewhere"
    assert class_archive.ClassArchive(tmp_path / "a b", []).options == [], "spark-submit splits options at spaces"
    monkeypatch.setenv("ENGINE_CDS", "off")
    assert class_archive.ClassArchive(tmp_path, []).options == []
