"""The least a first run can do: read the demo's records and append them to a new Delta table,
nothing else (no check, no dedupe, no second sink, no error table). ``bench/fixed_cost.py`` submits
it through ``spark-submit.sh`` (``ENGINE_APP``) with a fresh warehouse as its one argument: the
floor of a first run on a cold JVM, which no engine on this platform can go under."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platform.pyspark_path import prefer_compiled_pyspark

INPUT = Path(__file__).resolve().parents[1] / "jobs" / "demo" / "data" / "orders.json"

if __name__ == "__main__":
    prefer_compiled_pyspark()  # as the engine's driver does
    from engine.runtime.session import build_session

    spark = build_session("minimal-delta")
    spark.read.json(str(INPUT)).write.format("delta").mode("append").save(f"{sys.argv[1]}/orders")
    spark.stop()
