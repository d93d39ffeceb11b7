"""Small helpers shared by tests: write input files, compile and run a job dict."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from engine.spec import JobSpec, compile_job

NAP = "engine.test.nap"
"""A JVM system property: how many milliseconds each record of a :data:`NAP_SQL` step sleeps (unset: none).
A test sets it only in the JVM whose run must last long enough to be stopped (``System.setProperty``,
or ``-Dengine.test.nap=300`` for a driver it starts); its reruns are then the same job (the same stored
plan and chain) without the naps."""

NAP_SQL = (
    f"reflect('java.lang.Thread', 'sleep', cast(reflect('java.lang.System', 'getProperty', '{NAP}', '0') as bigint))"
)
"""A SQL expression that sleeps :data:`NAP` ms in the JVM (a ``derive`` column: once per record)."""


def write_jsonl(path: Path, rows: list[dict[str, Any] | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def compile_dict(raw: dict[str, Any], lake: Path, *, name: str = "t", file: Path | None = None) -> JobSpec:
    return compile_job(raw, name=name, file=str(file) if file else None, warehouse=str(lake))


def run_dict(spark: Any, raw: dict[str, Any], lake: Path, *, name: str = "t") -> Any:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    store = InMemoryRunStore()
    result = JobManager(spark).run(compile_dict(raw, lake, name=name), "run-1", store)
    return result, store


def json_job(path: Path, converters: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A one-DAG job reading JSON lines at ``path`` into a Delta table ``out``."""
    job: dict[str, Any] = {
        "sources": {"in": {"type": "files", "format": "json", "path": str(path), **extra.pop("source", {})}},
        "converters": converters,
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    job.update(extra)
    return job


def run_with(spark: Any, raw: dict[str, Any], lake: Path, metadata: Any, *, run: int, name: str = "t") -> Any:
    """Run ``raw`` against a shared metadata store (state carried between runs)."""
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    return JobManager(spark, metadata).run(compile_dict(raw, lake, name=name), f"run-{run}", InMemoryRunStore())


def touch(path: Path, rows: list[dict[str, Any]], *, mtime: float) -> Path:
    """Write JSON lines at ``path`` with a given modification time (seconds since the epoch)."""
    import os

    write_jsonl(path, rows)  # type: ignore[arg-type]
    os.utime(path, (mtime, mtime))
    return path


def delta_ids(path: Path, column: str = "id") -> list[Any]:
    """The ``column`` values of a Delta table, sorted, read with delta-rs (not Spark)."""
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(path)).to_pyarrow_table().column(column).to_pylist())


def run_cli(jobs_dir: Path, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """The command line ``./spark-submit.sh <args>`` runs, in this process (the test session's
    Spark, jobs from ``jobs_dir``, the environment with ``env``): its exit code, its last stdout
    line parsed, and its stderr, then its stdout."""
    import contextlib
    import io
    import os

    from pyspark.sql import SparkSession

    from engine.cli.app import compose_and_run, run_task

    session = SparkSession.getActiveSession()
    shuffle = session.conf.get("spark.sql.shuffle.partitions") if session else None
    given = {"ENGINE_JOBS_DIR": str(jobs_dir), **(env or {})}
    saved = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = compose_and_run([*args, "progress=off"], run_task)
    finally:
        if session is not None and shuffle is not None:  # the engine's Spark profile sets its own
            session.conf.set("spark.sql.shuffle.partitions", shuffle)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    lines = out.getvalue().strip().splitlines()
    return code, json.loads(lines[-1]) if lines else {}, err.getvalue() + out.getvalue()


class Receiver(ThreadingHTTPServer):
    """An HTTP server on loopback that answers every PUT and POST with ``status`` and keeps each
    request as ``(method, path, body)``: the far end of a push (Pushgateway, OpenLineage)."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Recording)
        self.status = status
        self.received: list[tuple[str, str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Recording(BaseHTTPRequestHandler):
    server: Receiver

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self.server.received.append((self.command, self.path, body))
        self.send_response(self.server.status)
        self.end_headers()

    do_POST = do_PUT

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def receiving(status: int = 200) -> Iterator[Receiver]:
    """A :class:`Receiver` serving until the block ends."""
    server = Receiver(status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
