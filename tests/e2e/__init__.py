"""End-to-end tests: ``./spark-submit.sh`` run as a user runs it."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUBMIT = [
    str(REPO / "spark-submit.sh"),
    "--driver-memory",
    "1g",
    "--master",
    "local[2]",
    "--conf",
    "spark.ui.enabled=false",
]
"""The wrapper with a small local driver, as every e2e test submits (append the job's arguments)."""
