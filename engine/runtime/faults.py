"""Fault injection for failure tests and drills, driven by environment variables.

``ENGINE_FAIL_DATASETS=<glob>[,<glob>...]``: every multi-work-unit reading a dataset whose URN
matches fails *on the executors*, mid-read, with an error naming the dataset (a Spark
``raise_error``), exactly as a corrupt input or a lost connection would.
"""

from __future__ import annotations

import fnmatch
import os
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine.converters.frame import DATASET

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FAIL_DATASETS = "ENGINE_FAIL_DATASETS"


def doomed(datasets: list[str]) -> list[str]:
    patterns = [p.strip() for p in os.environ.get(FAIL_DATASETS, "").split(",") if p.strip()]
    return [d for d in datasets if any(fnmatch.fnmatchcase(d, p) for p in patterns)]


def inject(frame: DataFrame, datasets: list[str]) -> DataFrame:
    """``frame``, failing while read if it holds a dataset named by :data:`FAIL_DATASETS`."""
    bad = doomed(datasets)
    if not bad:
        return frame
    boom = F.raise_error(F.concat(F.lit("injected failure reading dataset "), F.col(DATASET)))
    return frame.where(F.when(F.col(DATASET).isin(bad), boom).otherwise(F.lit(True)))
