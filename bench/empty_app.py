"""An empty PySpark application: the session the engine builds, then stop. ``bench/fixed_cost.py``
submits it through ``spark-submit.sh`` (``ENGINE_APP``) as the baseline of a run's fixed cost."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platform.pyspark_path import prefer_compiled_pyspark

if __name__ == "__main__":
    prefer_compiled_pyspark()  # as the engine's driver does: the floor stays the floor
    from engine.runtime.session import build_session

    build_session("engine").stop()
