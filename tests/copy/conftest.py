"""Fixtures of the copy-job tests: a session-wide S3-compatible server (moto, tests/s3.py) and a fresh bucket."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.s3 import S3Server


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
