"""Fault injection for failure tests and drills, as the run's hooks ask (:mod:`engine.hooks`,
installed from the environment when a run starts).

``ENGINE_FAIL_DATASETS=<glob>[,<glob>...]``: every multi-work-unit reading a dataset whose URN
matches fails *on the executors*, mid-read, with an error naming the dataset (a Spark
``raise_error``), exactly as a corrupt input or a lost connection would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from engine import hooks
from engine.converters.frame import DATASET
from engine.hooks import FAIL_DATASETS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["FAIL_DATASETS", "doomed", "inject"]


def doomed(datasets: list[str]) -> list[str]:
    """Those of ``datasets`` the hooks in force fail."""
    return hooks.current().doomed(datasets)


def inject(frame: DataFrame, datasets: list[str]) -> DataFrame:
    """``frame``, failing while read if it holds a dataset named by :data:`FAIL_DATASETS`."""
    bad = doomed(datasets)
    if not bad:
        return frame
    boom = F.raise_error(F.concat(F.lit("injected failure reading dataset "), F.col(DATASET)))
    return frame.where(F.when(F.col(DATASET).isin(bad), boom).otherwise(F.lit(True)))
