"""Values Spark observed while an action ran (a :class:`~pyspark.sql.Observation`), read without
waiting forever: ``Observation.get`` blocks until they arrive, and they never do for an action
that did not run the observed plan."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Observation


def observed(observation: Observation, *, wait: float) -> dict[str, Any] | None:
    """The observation's values by name; ``None`` if they have not arrived within ``wait``
    seconds (Spark hands them to a listener once the action has ended)."""
    if observation._jo is None:
        return None
    deadline = time.monotonic() + wait
    while observation._jo.getRowOrEmpty().isEmpty():  # each call waits 100 ms at most
        if time.monotonic() > deadline:
            return None
    return dict(observation.get)
