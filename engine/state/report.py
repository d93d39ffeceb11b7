"""What ``mode=status`` reports of a job, read from its stores: the last runs, every dataset's
current watermark, the datasets of the last run and the checkpoint changes. The CLI prints it
(:mod:`engine.cli.status`); this decides what is read and in which order it is shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.state.rows import LIVE, CheckpointChange, DatasetState, FlowStatusRow, JobStatusRow
from engine.state.store import StateStore, StatusStore

CHANGES_SHOWN = 10
"""How many of the newest checkpoint changes the report lists."""


@dataclass(frozen=True)
class StatusReport:
    job: str
    flows: list[FlowStatusRow]
    """The last runs, newest first."""
    states: list[DatasetState]
    """Every dataset's current state, by DAG, the live scope first, then by dataset."""
    latest: list[JobStatusRow]
    """The datasets of the last run."""
    changes: list[CheckpointChange]
    """The newest checkpoint changes, newest first."""

    @classmethod
    def read(cls, state: StateStore, status: StatusStore, job: str, *, runs: int = 5) -> StatusReport:
        flows = status.flow_status(job, limit=runs)
        states = sorted(state.all_state(job), key=lambda s: (s.dag, s.scope != LIVE, s.scope, s.dataset))
        latest = status.job_status(job, runs=1)
        return cls(job, flows, states, latest, state.changes(job, limit=CHANGES_SHOWN))

    def runs_summary(self) -> list[dict[str, Any]]:
        return [{"run_id": f.run_id, "status": f.status.value, "records": f.records} for f in self.flows]

    def datasets_summary(self) -> list[dict[str, Any]]:
        return [
            {
                "dag": s.dag,
                "scope": s.scope,
                "dataset": s.dataset,
                "watermark": s.watermark.payload() if s.watermark else None,
            }
            for s in self.states
        ]
