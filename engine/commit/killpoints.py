"""Kill points for crash tests and drills: ``ENGINE_KILL_AT=<point>[,<point>...]`` kills the driver
(``SIGKILL``: no cleanup, no ``finally``, no atexit) when it reaches a named point of the publish
protocol. The environment is read once, when a run starts (:mod:`engine.hooks`); a kill point
asks the hooks in force, a no-op unless a drill installed some. The points, in the order a run
meets them:

- ``after_plan_saved``: the batch plan is in the commit log; nothing read yet.
- ``after_staging``: every sink's data is staged; no commit sequence yet.
- ``after_sequence_written``: the sequence is in the commit log; no step has run.
- ``mid_step:<n>``: halfway through step ``n`` (1-based) when it moves or deletes several files.
- ``after_step:<n>``: step ``n`` is done.
- ``before_state_saved``: every step but the watermark step is done.
- ``before_done``: every step is done; the sequence is not yet marked done.

``<point>@<dag>`` kills only in that DAG (DAGs of a job run in parallel).
"""

from __future__ import annotations

from engine import hooks
from engine.hooks import KILL_AT

__all__ = ["KILL_AT", "kill_point"]


def kill_point(name: str, dag: str) -> None:
    """``dag`` reached the kill point ``name`` (one of the points above)."""
    hooks.current().reached(name, dag)
