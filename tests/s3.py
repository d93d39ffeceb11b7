"""A real S3-compatible server for the tests: moto's server mode in its own process.

:class:`S3Server` runs ``python -m moto.server`` (from this interpreter's environment: moto is pinned in
requirements.lock) on 127.0.0.1 and a free port, waits until it answers HTTP, and on :meth:`S3Server.stop`
terminates it and waits for it (no process is left). Clients talk to it over real HTTP with credentials that must be
right: the server enforces IAM authentication and issues one user's access key at start
(:attr:`S3Server.access_key`, :attr:`S3Server.secret_key`). :meth:`S3Server.options` for ``engine.copy.fs.resolve``,
:meth:`S3Server.client` for an independent boto3 client, :meth:`S3Server.env` for the standard
``AWS_*`` variables every client reads (Spark's S3A, delta-rs, obstore).

Also a pytest plugin (``pytest_plugins`` of tests/conftest.py): the session-wide server ``s3_server``,
a fresh ``bucket`` per test, and ``s3_env``, the server's variables set for one test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.watchdog import Watchdog

HOST = "127.0.0.1"
REGION = "us-east-1"
ADMIN_SETUP_CALLS = 3
"""Requests the server takes without credentials (``INITIAL_NO_AUTH_ACTION_COUNT``): creating the
test user, its access key and its policy. Every later request must be signed with that key."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _server_env() -> dict[str, str]:
    """The environment without AWS_*/MOTO_* variables (they would change how moto behaves)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}


class S3Server:
    """moto's S3 (and every other service it mocks) on ``endpoint``; a context manager."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="engine-s3-"))
        self.log = self.base / "server.log"
        self.port = 0
        self.access_key = ""
        self.secret_key = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog = Watchdog(self.base / "watchdog.pids", remove=self.base)  # should pytest be killed

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def options(self) -> dict[str, Any]:
        """Options for ``engine.copy.fs.resolve`` of an ``s3://`` URL on this server."""
        return {
            "endpoint": self.endpoint,
            "region": REGION,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }

    def env(self) -> dict[str, str]:
        """The standard variables pointing every AWS client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def storage_options(self) -> dict[str, str]:
        """delta-rs ``storage_options`` for this server (explicit credentials: no AWS_* variable counts)."""
        return {
            "aws_endpoint": self.endpoint,
            "aws_allow_http": "true",
            "aws_region": REGION,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
        }

    def client(self) -> Any:
        """A boto3 S3 client of this server (explicit credentials: the caller's AWS_* variables do not count)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def download(self, bucket: str, prefix: str, into: Path) -> Path:
        """Every object under ``prefix`` (a folder: ``wh/``) copied below ``into``, keys as paths
        (S3A's directory markers, keys ending in ``/``, become directories)."""
        client = self.client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                if item["Key"].endswith("/"):
                    (into / item["Key"][len(prefix) :]).mkdir(parents=True, exist_ok=True)
                    continue
                target = into / item["Key"][len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, item["Key"], str(target))
        return into

    def connection(self, folder: Path, bucket: str, *, name: str = "lake_s3", secret: str | None = None) -> Path:
        """An ``s3`` connection file ``<folder>/<name>.yaml`` serving ``bucket`` on this server."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.yaml"
        path.write_text(
            f"type: s3\nbuckets: [{bucket}]\nendpoint: {self.endpoint}\nregion: {REGION}\n"
            f"access_key: {self.access_key}\nsecret_key: {secret or self.secret_key}\n"
        )
        return path

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def start(self, attempts: int = 3) -> S3Server:
        """Start on a free port (another one if it was taken meanwhile); return once it answers."""
        for attempt in range(1, attempts + 1):
            self.port = _free_port()
            cmd = [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)]
            env = {**_server_env(), "INITIAL_NO_AUTH_ACTION_COUNT": str(ADMIN_SETUP_CALLS)}
            with self.log.open("ab") as log:
                self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            self._watchdog.track(self._proc.pid)
            try:
                ready = self._wait_ready()
                if ready:
                    self._issue_credentials()
            except BaseException:
                self.stop()
                raise
            if ready:
                return self
            text = self.log.read_text(errors="replace")
            self.stop(remove=False)
            if "in use" not in text or attempt == attempts:
                raise RuntimeError(f"moto server did not start on {self.endpoint}:\n{text[-3000:]}")
        raise AssertionError("unreachable")

    def _issue_credentials(self) -> None:
        """The test user, its access key and an allow-all policy: the server's unauthenticated calls."""
        import json

        import boto3

        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="engine-tests")
        key = iam.create_access_key(UserName="engine-tests")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="engine-tests", PolicyName="all", PolicyDocument=json.dumps(policy))
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]

    def _wait_ready(self, timeout: float = 60) -> bool:
        """True once the server answers HTTP; False if it exited first."""
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while self._proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server on {self.endpoint} not answering after {timeout}s")
            time.sleep(0.1)
        return False

    def stop(self, *, remove: bool = True) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)
            self._watchdog.disarm()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "s3: needs the session-scoped S3-compatible server (tests/s3.py)")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's server on a loopback port for the whole run; stopped (no process left) after the session."""
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """A new, empty bucket for one test."""
    return s3_server.make_bucket(f"test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The server's ``AWS_*`` variables set in this process for one test (and returned, for subprocesses)."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    env = s3_server.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def s3_connection(s3_server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The ``bucket``'s credentials in a named connection (``lake_s3``, found through
    ``ENGINE_CONNECTIONS_DIR``) and no ``AWS_*`` variable in this process, for one test; its
    ``storage.connections`` override."""
    monkeypatch.setenv("ENGINE_CONNECTIONS_DIR", str(s3_server.connection(tmp_path / "connections", bucket).parent))
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    yield "storage.connections=[lake_s3]"
