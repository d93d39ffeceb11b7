"""A real PostgreSQL server for the tests (a pytest plugin: tests/conftest.py lists it in ``pytest_plugins``).

``scripts/postgres.sh install`` (run by scripts/test.sh) puts Debian's server binaries in place. The session-scoped
``postgres`` fixture initdb's a throwaway cluster in a temporary directory, starts it on 127.0.0.1 and a free port
(password authentication over TCP, as the JDBC driver connects), creates the ``engine_test`` database, and at the
end of the session stops the server and removes the directory. Tests that use it are marked ``postgres``.

PostgreSQL refuses to run as root: under root the server runs as the ``postgres`` OS user (created by Debian's
package; ``nobody`` when it is missing), otherwise as the current user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.watchdog import watching

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "postgres.sh"
HOST = "127.0.0.1"
USER = "engine"
PASSWORD = "engine-secret"
DATABASE = "engine_test"


class PsqlError(RuntimeError):
    """A psql run that failed; the message carries psql's stderr."""


def _client_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's PG* variables (PGHOST, PGSERVICE, ... would redirect the tools)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PG")}, **extra}


@dataclass(frozen=True)
class Postgres:
    """The running server: where it listens, the superuser to connect as, and its client tools."""

    host: str
    port: int
    user: str
    password: str
    database: str
    bindir: Path

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    def psql(self, sql: str, *, database: str | None = None) -> str:
        """Run ``sql`` (any number of statements) through the real ``psql`` client over TCP with the password and
        return its stdout (unaligned, tuples only: one row a line, columns separated by ``|``). The first failing
        statement stops the script and raises :class:`PsqlError` with psql's stderr."""
        cmd = [
            str(self.bindir / "psql"),
            "-X",  # no ~/.psqlrc
            "-q",  # no command tags ("INSERT 0 3") in the output
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            database or self.database,
            "-f",
            "-",
        ]
        env = _client_env(PGPASSWORD=self.password, PGCONNECT_TIMEOUT="10")
        done = subprocess.run(cmd, input=sql, capture_output=True, text=True, env=env, timeout=300, check=False)
        if done.returncode != 0:
            raise PsqlError(f"psql failed (exit {done.returncode}): {done.stderr.strip()}")
        return done.stdout


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs the session-scoped PostgreSQL server (tests/postgres.py)")


def _bindir() -> Path:
    done = subprocess.run(["bash", str(SCRIPT), "bindir"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"no PostgreSQL server binaries ({done.stderr.strip()}); run 'bash scripts/postgres.sh install' "
            "(scripts/test.sh does)",
            pytrace=False,
        )
    return Path(done.stdout.strip())


def _server_user() -> pwd.struct_passwd | None:
    """The OS user to run initdb/pg_ctl as: None for the current one unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.fail("running as root and there is neither a 'postgres' nor a 'nobody' user to run PostgreSQL as")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class _Server:
    """initdb / pg_ctl on one data directory, run as ``owner``."""

    def __init__(self, bindir: Path, base: Path, owner: pwd.struct_passwd | None) -> None:
        self.bindir = bindir
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.owner = owner

    def command(self, tool: str, *args: str | Path) -> Sequence[str]:
        """``tool`` with ``args``, as the server's owner."""
        cmd: Sequence[str] = [str(self.bindir / tool), *map(str, args)]
        if self.owner is not None:
            if shutil.which("runuser"):
                cmd = ["runuser", "-u", self.owner.pw_name, "--", *cmd]
            else:
                cmd = ["su", "-s", "/bin/sh", self.owner.pw_name, "-c", shlex.join(cmd)]
        return cmd

    def run(self, tool: str, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(tool, *args),
            cwd=self.base,
            env=_client_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def must(self, tool: str, *args: str | Path, timeout: float = 120) -> None:
        done = self.run(tool, *args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()}")

    def init(self) -> None:
        pwfile = self.base / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.owner is not None:
            os.chown(self.base, self.owner.pw_uid, self.owner.pw_gid)
            os.chown(pwfile, self.owner.pw_uid, self.owner.pw_gid)
        self.must(
            "initdb",
            "--pgdata", self.data,
            "--username", USER,
            "--pwfile", pwfile,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        pwfile.unlink()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# tests/postgres.py: loopback only, socket in the temp dir, durability off (throwaway data)\n"
                f"listen_addresses = '{HOST}'\n"
                f"unix_socket_directories = '{self.base}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )

    def start(self, attempts: int = 3) -> int:
        """Start on a free port (another one if it was taken meanwhile); the port once it accepts connections."""
        for attempt in range(1, attempts + 1):
            port = _free_port()
            done = self.run("pg_ctl", "start", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o", f"-p {port}")
            if done.returncode == 0:
                self.wait_ready(port)
                return port
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            if "could not bind" not in log or attempt == attempts:
                raise RuntimeError(f"pg_ctl start failed: {done.stdout.strip()} {done.stderr.strip()}\n{log[-3000:]}")
        raise AssertionError("unreachable")

    def wait_ready(self, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            done = self.run("pg_isready", "-h", HOST, "-p", str(port), "-t", "1", timeout=10)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on {HOST}:{port} not ready after {timeout}s: {done.stdout.strip()}")
            time.sleep(0.1)

    def postmaster(self) -> int:
        """The running server's pid (the first line of ``postmaster.pid``)."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        pidfile = self.data / "postmaster.pid"
        if not pidfile.exists():
            return
        pid = pidfile.read_text().split("\n", 1)[0].strip()
        done = self.run("pg_ctl", "stop", "-D", self.data, "-m", "fast", "-w", "-t", "60")
        if done.returncode != 0:
            self.run("pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w", "-t", "30")
        # pg_ctl returns once postmaster.pid is gone; the postmaster (an orphan: pg_ctl exited long ago) is then a
        # zombie until init reaps it, which some inits (in containers and microVMs) do only every second or two.
        deadline = time.monotonic() + 10
        while pid.isdigit() and Path("/proc", pid).exists() and time.monotonic() < deadline:
            time.sleep(0.05)


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A PostgreSQL server with the ``engine_test`` database, stopped and removed on exit (the
    fixture's, and the benchmarks')."""
    bindir = _bindir()
    server = _Server(bindir, Path(tempfile.mkdtemp(prefix="engine-pg-")), _server_user())
    # should this process be killed, pg_ctl stops the server (it is a daemon: nothing else would)
    stop = server.command("pg_ctl", "stop", "-D", server.data, "-m", "immediate", "-w", "-t", "30")
    with watching(server.base / "watchdog.pids", remove=server.base, stop=stop) as dog:
        try:
            server.init()
            port = server.start()
            dog.track(server.postmaster())
            pg = Postgres(host=HOST, port=port, user=USER, password=PASSWORD, database=DATABASE, bindir=bindir)
            pg.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
            yield pg
        finally:
            try:
                server.stop()
            finally:
                shutil.rmtree(server.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the whole run, with the ``engine_test`` database; gone after the session."""
    with running_postgres() as running:
        yield running
