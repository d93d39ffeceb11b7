"""Metadata stores: run history, dataset state and status, and the commit log (Delta, in-memory)."""

from engine.state.runs import InMemoryRunStore, RunRecord, RunStore
from engine.state.status import Status

__all__ = ["InMemoryRunStore", "RunRecord", "RunStore", "Status"]
