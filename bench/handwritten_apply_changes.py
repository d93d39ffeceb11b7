"""The hand-written side of ``bench/apply_changes_vs_handwritten.py`` (``run_hand``, unchanged) as
an application of its own: ``bench/apply_changes_commands.py`` submits it through
``spark-submit.sh`` (``ENGINE_APP``) with the events and the directory holding the table as its
arguments."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platform.pyspark_path import prefer_compiled_pyspark

if __name__ == "__main__":
    prefer_compiled_pyspark()  # as the engine's driver does
    from bench.apply_changes_vs_handwritten import run_hand
    from engine.runtime.session import build_session

    spark = build_session("handwritten-apply-changes")
    run_hand(spark, Path(sys.argv[1]), Path(sys.argv[2]))
    spark.stop()
