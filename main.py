"""What spark-submit runs: ``./spark-submit.sh job=demo/orders [key=value ...]``."""

import os
import sys

from engine.cli import main

if __name__ == "__main__":
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
