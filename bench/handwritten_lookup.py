"""The hand-written side of ``bench/lookup_vs_handwritten.py`` (``run_hand``, unchanged) as an
application of its own: ``bench/ingest_commands.py --lookup`` submits it through
``spark-submit.sh`` (``ENGINE_APP``) with the input, the reference table and a fresh output
directory as its arguments."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platform.pyspark_path import prefer_compiled_pyspark

if __name__ == "__main__":
    prefer_compiled_pyspark()  # as the engine's driver does
    from bench.lookup_vs_handwritten import run_hand
    from engine.runtime.session import build_session

    spark = build_session("handwritten-lookup")
    run_hand(spark, sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
    spark.stop()
