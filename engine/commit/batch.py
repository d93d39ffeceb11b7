"""What a sink needs to stage one batch: where its staging goes, its Delta app id and number."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.commit.steps import CommitStep

STAGING_DIR = "_engine_staging"
"""Below each sink's path; hidden from Spark's readers by its leading underscore."""


@dataclass(frozen=True)
class BatchRef:
    job: str
    dag: str
    number: int
    epoch: str = ""
    """The commit log's epoch (:meth:`~engine.state.store.CommitLogStore.log_epoch`)."""
    user_metadata: str = ""

    @property
    def app_id(self) -> str:
        """Delta's ``txnAppId`` prefix: stable per commit log, job and DAG (each sink appends its
        name)."""
        return f"engine:{self.epoch}:{self.job}:{self.dag}"

    def staging(self, target: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{self.job}.{self.dag}.b{self.number}")
        return f"{target.rstrip('/')}/{STAGING_DIR}/{name}"


@dataclass
class Staged:
    """A sink's staged output: the steps that publish it and the directory to clean up after."""

    steps: list[CommitStep] = field(default_factory=list)
    staging: str | None = None
    rows: int | None = None
    """How many rows the sink staged, when that is not its branch's count (a sink holding one row
    per key keeps one of a key's rows that are all alike); ``None``: the branch's count."""
