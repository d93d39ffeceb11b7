"""The driver's stderr under spark-submit: the JVM's own, not stdout.

spark-submit starts the Python driver with its stderr merged into its stdout (Spark's
``PythonRunner`` redirects the error stream "to synchronize" them), and copies both to the JVM's
stdout. Logs would then sit among the end-of-run table and the JSON summary, which a scheduler
parses. :func:`route_stderr` points ``sys.stderr`` at the JVM's ``System.err`` through the py4j
gateway spark-submit already runs: logs, warnings and error messages reach the terminal's or the
caller's stderr, in order with Spark's own log lines, and stdout keeps only what the run prints
as its result. A write the JVM can no longer take (it is shutting down) goes to the original stream.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import Any

__all__ = ["route_stderr"]


class JvmStderr(io.TextIOBase):
    """A text stream writing UTF-8 bytes to a ``java.io.PrintStream`` over py4j."""

    def __init__(self, stream: Any, fallback: Any) -> None:
        self._stream = stream
        self._fallback = fallback
        self._lock = threading.Lock()
        self._broken = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not text:
            return 0
        if not self._broken:
            data = bytearray(text.encode("utf-8", "replace"))
            try:
                with self._lock:
                    self._stream.write(data, 0, len(data))
                    if "\n" in text:
                        self._stream.flush()
                return len(text)
            except Exception:  # the gateway is gone: the rest goes where it would have
                self._broken = True
        self._fallback.write(text)
        return len(text)

    def flush(self) -> None:
        if self._broken:
            self._fallback.flush()
            return
        try:
            with self._lock:
                self._stream.flush()
        except Exception:
            self._broken = True

    def fileno(self) -> int:
        return int(self._fallback.fileno())

    def isatty(self) -> bool:
        return False


def route_stderr() -> bool:
    """Under spark-submit (its gateway's port in the environment), make ``sys.stderr`` the JVM's;
    ``ENGINE_STDERR=merged`` keeps Spark's merging. Whether it did."""
    port = os.environ.get("PYSPARK_GATEWAY_PORT")
    if not port or os.environ.get("ENGINE_STDERR") == "merged" or isinstance(sys.stderr, JvmStderr):
        return False
    try:
        from py4j.java_gateway import GatewayParameters, JavaGateway

        parameters = GatewayParameters(port=int(port), auth_token=os.environ.get("PYSPARK_GATEWAY_SECRET"))
        err = JavaGateway(gateway_parameters=parameters).jvm.System.err
        err.flush()  # connects now: a gateway that does not answer leaves stderr as it is
    except Exception:
        return False
    sys.stderr = JvmStderr(err, sys.stderr)
    return True
