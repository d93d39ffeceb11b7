"""The flow service as its users reach it: ``serve.sh`` started on a loopback port, users made
with ``serve.sh users add``, requests over HTTP. One service is shared by the tests that only
talk to it; tests that stop or kill a service start their own."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography.fernet import Fernet

from tests.e2e import REPO
from tests.watchdog import Watchdog, children, stat_fields, watching

SERVE = REPO / "serve.sh"
ARTIFACTS = Path(os.environ.get("ENGINE_TEST_ARTIFACTS", REPO / ".cache" / "test-artifacts"))
"""Where browser tests keep their screenshots (scripts/chromium.sh installs the browser)."""
START_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def add_user(warehouse: Path, name: str, *groups: str, admin: bool = False) -> str:
    """``serve.sh users add``: the token, its last line."""
    args = [str(SERVE), "users", "add", name, *(a for g in groups for a in ("--group", g))]
    done = subprocess.run(
        [*args, *(["--admin"] if admin else []), f"warehouse={warehouse}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Served:
    """A running ``serve.sh`` and the tokens of its users."""

    warehouse: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    tokens: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    """More ``serve.sh`` options (``--tick``, ``--no-scheduler``)."""
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    watchdog: Watchdog | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Served:
        self.log = self.warehouse.parent / f"serve-{self.port}-{time.time_ns()}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(SERVE), "--port", str(self.port), *self.flags, f"warehouse={self.warehouse}"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        # should pytest be killed: stops the service, and its executions (sessions of their own)
        self.watchdog = Watchdog(self.log.with_suffix(".pids"))
        self.watchdog.track(self.proc.pid, tree=True)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if requests.get(f"{self.url}/healthz", timeout=1).ok:
                    return self
            except requests.ConnectionError:
                time.sleep(0.2)
        raise AssertionError(f"the service did not start: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the service. The executions it started go on without it (by design): its
        watchdog keeps them, and stops those still running should pytest end or be killed."""
        assert self.proc is not None
        executions = children(self.proc.pid)
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        if self.watchdog is not None:
            left = [pid for pid in executions if stat_fields(pid) is not None]
            for pid in left:
                self.watchdog.track(pid, tree=True)
            if not left:
                self.watchdog.disarm()
        return code

    def stop_gracefully(self) -> None:
        """SIGTERM: uvicorn finishes the requests in flight, then ends by the signal."""
        assert self.stop() in (0, -signal.SIGTERM)
        assert self.log is not None and "Application shutdown complete" in self.log.read_text()

    def user(self, name: str, *groups: str, admin: bool = False) -> str:
        self.tokens[name] = add_user(self.warehouse, name, *groups, admin=admin)
        return self.tokens[name]

    def call(self, method: str, path: str, who: str | None = None, **kw: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        headers.update(kw.pop("headers", {}))
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kw)


def service_env(tmp: Path) -> dict[str, str]:
    """The service's environment: a master key for the secrets it stores, the test's Python."""
    key = tmp / "master.key"
    if not key.exists():
        key.write_text(Fernet.generate_key().decode())
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    return {**env, "ENGINE_MASTER_KEY_FILE": str(key)}


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One service for the tests that only talk to it, with users admin, carol (group analysts,
    allowed by the demo's template pack) and bob (group ops)."""
    tmp = tmp_path_factory.mktemp("service")
    found = Served(tmp / "wh", service_env(tmp))
    found.user("admin", admin=True)
    found.user("carol", "analysts")
    found.user("bob", "ops")
    found.start()
    yield found
    found.stop_gracefully()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium driven by Selenium, both from Debian's packages (scripts/chromium.sh)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    driver_path, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    assert driver_path and chromium, "no chromium/chromedriver on PATH: run `bash scripts/chromium.sh install`"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(executable_path=driver_path), options=options)
    with watching(tmp_path_factory.mktemp("browser") / "watchdog.pids") as dog:  # should pytest be killed
        try:
            dog.track(driver.service.process.pid, tree=True)  # chromedriver, chromium and its children
            driver.set_page_load_timeout(30)
            yield driver
        finally:
            driver.quit()
