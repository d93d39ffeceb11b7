"""A real Spark standalone cluster for the tests: one master and one worker on loopback, from the installed pyspark.

``with StandaloneCluster(base) as cluster:`` starts ``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker`` on 127.0.0.1 and free ports, each in its own process group with its output in
``<base>/logs/``, and returns once the master reports the worker ALIVE (its web UI's ``/json/``). On exit it
stops both, worker first: SIGTERM to each process group (the worker's executors and their Python workers are in
the worker's group), SIGKILL after a grace period, and checks that none of those processes is left.

Ports are picked free and then bound by the JVM a moment later; ``spark.port.maxRetries=0`` makes a daemon that
lost that race exit (instead of quietly moving to the next port), and the start is retried on new ports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyspark

from tests.watchdog import Watchdog, stat_fields

HOST = "127.0.0.1"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Proxy variables in the environment must not reroute requests to the loopback web UI.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(RuntimeError):
    """The cluster did not start, or did not stop cleanly; the message carries the tail of the daemons' logs."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = stat_fields(int(entry.name))
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":  # None: it ended while we looked
            members.append(int(entry.name))
    return members


class _Daemon:
    """One spark-class JVM (spark-class execs java, so the pid is the JVM's) leading its own process group."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path, prefix: list[str]) -> None:
        self.name = name
        self.log = log
        self._out: IO[bytes] = log.open("ab")
        cmd = [*prefix, str(SPARK_HOME / "bin" / "spark-class"), *args]
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} ({self.log}) ---\n{text[-chars:]}"

    def stop(self, grace: float) -> list[int]:
        """SIGTERM the group, SIGKILL what is left after ``grace`` seconds; the pids that still survive."""
        pgid = self.pid
        self._signal(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        left = self._wait_group(pgid, timeout=grace)
        if left or self.proc.poll() is None:
            self._signal(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
            left = self._wait_group(pgid, timeout=grace)
        self._out.close()
        return left if self.proc.poll() is not None else [self.pid, *left]

    @staticmethod
    def _signal(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)

    @staticmethod
    def _wait_group(pgid: int, timeout: float) -> list[int]:
        # children the daemon leaves behind are reparented to init, which may reap them only every second or two
        deadline = time.monotonic() + timeout
        while (left := group_members(pgid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left


class StandaloneCluster:
    """A Spark master and one worker (``cores``, ``memory``) on 127.0.0.1; a context manager.

    ``base`` holds ``logs/`` (each daemon's output), ``work/`` (the worker's work dir: one directory per
    application, one per executor with its ``stdout``/``stderr``) and ``conf/`` (an empty SPARK_CONF_DIR, so no
    spark-defaults or spark-env of the machine leaks in)."""

    def __init__(
        self,
        base: Path,
        *,
        cores: int = 2,
        memory: str = "2g",
        timeout: float = 180,
        stop_grace: float = 20,
        hidden: Path | None = None,
    ) -> None:
        self.base = base
        self.hidden = hidden
        """A directory the worker and its executors do not see (an empty one in its place), as if
        they ran on another machine: the worker runs in a mount namespace of its own (``unshare``)
        with a tmpfs mounted there. The driver, outside, sees the directory as it is."""
        self.cores = cores
        self.memory = memory
        self.timeout = timeout
        self.stop_grace = stop_grace
        self.log_dir = base / "logs"
        self.work_dir = base / "work"
        self.conf_dir = base / "conf"
        self.port = 0
        self.webui_port = 0
        self._daemons: list[_Daemon] = []
        self._watchdog: Watchdog | None = None

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self, attempts: int = 3) -> None:
        for path in (self.log_dir, self.work_dir, self.conf_dir):
            path.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(attempt)
                return
            except ClusterError as e:
                self.stop()
                if "BindException" not in str(e) or attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, attempt: int) -> None:
        self.port, self.webui_port = free_port(), free_port()
        master = self._launch(
            f"master-{attempt}",
            MASTER_CLASS,
            "--host", HOST,
            "--port", str(self.port),
            "--webui-port", str(self.webui_port),
        )  # fmt: skip
        self._wait("the master to accept workers", lambda s: s.get("status") == "ALIVE", [master])
        worker = self._launch(
            f"worker-{attempt}",
            WORKER_CLASS,
            self.master_url,
            "--host", HOST,
            "--cores", str(self.cores),
            "--memory", self.memory,
            "--webui-port", str(free_port()),
            "--work-dir", str(self.work_dir),
            prefix=self._hiding(),
        )  # fmt: skip
        self._wait("the worker to register", lambda s: len(self._alive_workers(s)) >= 1, [master, worker])

    def _hiding(self) -> list[str]:
        """``unshare`` (util-linux; root or user namespaces) then ``sh`` mounting the tmpfs and
        exec'ing the daemon, so its pid stays the JVM's."""
        if self.hidden is None:
            return []
        self.hidden.mkdir(parents=True, exist_ok=True)
        script = 'mount -t tmpfs engine-hidden "$0" && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(self.hidden)]

    def _launch(self, name: str, *args: str, prefix: list[str] | None = None) -> _Daemon:
        daemon = _Daemon(name, list(args), self._env(), self.log_dir / f"{name}.log", prefix or [])
        self._daemons.append(daemon)
        if self._watchdog is None:  # each daemon leads a process group that a killed pytest would leave
            self._watchdog = Watchdog(self.base / "watchdog.pids")
        self._watchdog.track(daemon.pid, group=True)
        return daemon

    def _env(self) -> dict[str, str]:
        # JAVA_HOME and PATH stay as the caller has them: spark-class runs $JAVA_HOME/bin/java, else java on PATH
        daemon_opts = f"-Dspark.port.maxRetries=0 -Djava.io.tmpdir={self.base}"
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_HOSTNAME": HOST,
            "SPARK_DAEMON_MEMORY": "512m",
            "SPARK_DAEMON_JAVA_OPTS": daemon_opts,
        }

    def _wait(self, what: str, ready: Callable[[dict[str, Any]], bool], daemons: list[_Daemon]) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            dead = [d for d in daemons if d.proc.poll() is not None]
            if dead:
                raise ClusterError(
                    f"waiting for {what}: {dead[0].name} exited with {dead[0].proc.returncode}\n{self.logs()}"
                )
            with contextlib.suppress(OSError, ValueError):  # not listening yet, or a half-written answer
                if ready(self.state()):
                    return
            if time.monotonic() > deadline:
                where = f"{self.webui_url}/json/"
                raise ClusterError(f"gave up waiting {self.timeout:.0f}s for {what} ({where})\n{self.logs()}")
            time.sleep(0.25)

    def state(self) -> dict[str, Any]:
        """The master's state as its web UI serves it: ``workers``, ``aliveworkers``, ``activeapps``,
        ``completedapps``, ``status``, ..."""
        with _NO_PROXY.open(f"{self.webui_url}/json/", timeout=5) as answer:
            parsed = json.loads(answer.read())
        if not isinstance(parsed, dict):
            raise ValueError(f"unexpected answer from {self.webui_url}/json/: {parsed!r}")
        return parsed

    @staticmethod
    def _alive_workers(state: dict[str, Any]) -> list[dict[str, Any]]:
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def logs(self, chars: int = 3000) -> str:
        """The tail of every daemon's log, for error messages."""
        return "\n".join(d.tail(chars) for d in self._daemons)

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master; raise if any of their processes survives."""
        left: dict[str, list[int]] = {}
        while self._daemons:
            daemon = self._daemons.pop()  # the last started first: workers before their master
            if survivors := daemon.stop(self.stop_grace):
                left[daemon.name] = survivors
        if self._watchdog is not None and not left:
            self._watchdog.disarm()
            self._watchdog = None
            (self.base / "watchdog.pids").unlink(missing_ok=True)
        if left:
            raise ClusterError(f"processes left after stopping the cluster: {left}")
