"""Guards on how many py4j round trips the driver's frequent JVM calls take (counted at the gateway
client, no timing): each is a socket exchange with the JVM, and a path operation or a run's settings
that took dozens of them cost a sixth of an in-process run of a small job (issue 75)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.platform.jvm import session_settings
from engine.storage.hadoop import HadoopFs


@contextmanager
def round_trips(spark: Any) -> Iterator[list[str]]:
    """The commands the driver sends the JVM meanwhile (each one round trip)."""
    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    real = client.send_command

    def counted(command: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return real(command, *args, **kwargs)

    client.send_command = counted
    try:
        yield sent
    finally:
        del client.send_command  # the class's method again


def test_a_file_size_takes_a_few_round_trips_and_a_missing_file_no_exception(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "here").write_bytes(b"12345")
    fs = HadoopFs(spark)
    fs.size(str(tmp_path / "here"))  # the classes it uses, looked up once per JVM
    with round_trips(spark) as missing:
        assert fs.size(str(tmp_path / "gone")) is None
    with round_trips(spark) as present:
        assert fs.size(str(tmp_path / "here")) == 5
    assert len(missing) <= 3, missing  # a path, its file system, exists: no exception to convert
    assert len(present) <= 5, present


def test_the_sessions_settings_come_in_one_call_however_many(spark: Any) -> None:
    session_settings(spark)
    with round_trips(spark) as sent:
        settings = session_settings(spark)
    assert settings == dict(spark.conf.getAll)
    assert len(settings) > 10
    assert len(sent) <= 4, sent
