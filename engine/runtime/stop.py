"""A run asked to stop (SIGTERM, SIGINT, or its wrapper gone): no new DAG starts, running ones
are cancelled unless already publishing, and nothing half-done is published."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Stop:
    event: threading.Event = field(default_factory=threading.Event)
    reason: str = ""
    signum: int | None = None

    def request(self, reason: str, signum: int | None = None) -> bool:
        """Ask the run to stop; ``False`` if it was already asked."""
        if self.event.is_set():
            return False
        self.reason, self.signum = reason, signum
        self.event.set()
        return True

    def is_set(self) -> bool:
        return self.event.is_set()
