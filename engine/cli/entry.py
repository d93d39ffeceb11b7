"""The driver's entry: what ``main.py`` (``spark-submit.sh``) and the ``engine`` command's driver run."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from engine.cli.app import main
from engine.cli.jvm_watch import die_with_jvm
from engine.cli.stderr import route_stderr
from engine.platform.pyspark_path import prefer_compiled_pyspark

__all__ = ["driver_main"]


def driver_main() -> NoReturn:
    """Run the command line in ``sys.argv`` and leave with its exit code."""
    die_with_jvm()  # under spark-submit: a JVM killed outright takes its driver (and the lease) along
    prefer_compiled_pyspark()
    route_stderr()  # spark-submit merges the driver's stderr into stdout: logs go to the JVM's stderr
    try:
        main()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if not isinstance(done.code, int | None):
            print(done.code, file=sys.stderr)
        # Leave without interpreter finalisation: delta-rs (metadata) and pyarrow tear down their
        # native threads in an order that sometimes aborts ("terminate called without an active
        # exception", exit 134) after a run that succeeded (delta-io/delta-rs#2184).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise AssertionError("main() always exits")  # pragma: no cover
