"""The demo job (``jobs/demo/orders.conf``) written by hand in PySpark: the baseline of a first run.

``bench/fixed_cost.py`` submits it through ``spark-submit.sh`` (``ENGINE_APP``) with a fresh
warehouse as its one argument, beside the engine's first run of the demo. It does what the demo
does, as one would write it without the engine: the same read (JSON lines with the Avro schema's
columns), the same checks and conversions as native expressions, the same dedupe, and the same
writes: the valid orders appended to a Delta table partitioned by day, the big ones to Parquet,
the rejected records (with why) to a Delta error table. It keeps none of the engine's promises
(no state, no commit log, no exactly-once): it is the floor a first run could reach on the same JVM.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platform.pyspark_path import prefer_compiled_pyspark

ROOT = Path(__file__).resolve().parents[1]
INPUT = ROOT / "jobs" / "demo" / "data" / "orders.json"
SCHEMA = (
    "order_id BIGINT, customer STRING, email STRING, amount STRING, currency STRING, "
    "created_at STRING, items ARRAY<STRING>, _corrupt_record STRING"
)
COLUMNS = ("order_id", "customer", "email", "amount", "currency", "created_at", "items")
EMAIL = r"[^@\s]+@[^@\s]+\.[a-z]+"
TS_FORMAT = "yyyy-MM-dd HH:mm:ss"


def run(warehouse: str) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from engine.runtime.session import build_session

    spark = build_session("handwritten-demo")
    raw = spark.read.schema(SCHEMA).option("columnNameOfCorruptRecord", "_corrupt_record").json(str(INPUT))
    amount = F.col("amount").try_cast("decimal(12,2)")
    created = F.try_to_timestamp(F.col("created_at"), F.lit(TS_FORMAT))
    checks = [
        (F.col("_corrupt_record").isNotNull(), "malformed record"),
        (F.col("order_id").isNull(), "order_id is null"),
        (F.col("customer").isNull(), "customer_id is null"),
        (F.col("amount").isNotNull() & amount.isNull(), "amount is not a decimal(12,2)"),
        (~F.coalesce(amount >= 0, F.lit(False)), "negative amount"),
        (F.col("email").isNotNull() & ~F.col("email").rlike(f"^(?:{EMAIL})$"), "email does not match"),
        (F.col("created_at").isNotNull() & created.isNull(), f"created_at is not {TS_FORMAT}"),
    ]
    reason = F.when(checks[0][0], checks[0][1])
    for bad, why in checks[1:]:
        reason = reason.when(bad, why)
    original = F.coalesce(F.col("_corrupt_record"), F.to_json(F.struct(*COLUMNS), {"ignoreNullFields": "false"}))
    checked = raw.select(
        F.col("order_id"),
        F.col("customer").alias("customer_id"),
        "email",
        amount.alias("amount"),
        "currency",
        created.alias("created_at"),
        "items",
        reason.alias("reason"),
        original.alias("record"),
    ).persist()
    try:
        latest = Window.partitionBy("order_id").orderBy(F.col("created_at").desc())
        valid = (
            checked.where(F.col("reason").isNull())
            .withColumn("order_date", F.to_date("created_at"))
            .withColumn("item_count", F.size("items"))
            .withColumn("_n", F.row_number().over(latest))
            .where("_n = 1")
            .drop("_n", "reason", "record")
        ).persist()
        try:
            valid.write.format("delta").mode("append").partitionBy("order_date").save(f"{warehouse}/orders")
            valid.where("amount >= 500").write.mode("overwrite").parquet(f"{warehouse}/extracts/big_orders")
        finally:
            valid.unpersist()
        errors = checked.where(F.col("reason").isNotNull()).select(
            "reason", "record", F.current_timestamp().alias("error_time")
        )
        errors.write.format("delta").mode("append").save(f"{warehouse}/_errors/orders")
    finally:
        checked.unpersist()
    spark.stop()


if __name__ == "__main__":
    prefer_compiled_pyspark()  # as the engine's driver does
    run(sys.argv[1])
