"""Metadata stores: run history now; watermarks and the commit log later."""

from engine.state.runs import InMemoryRunStore, RunRecord, RunStatus, RunStore

__all__ = ["InMemoryRunStore", "RunRecord", "RunStatus", "RunStore"]
