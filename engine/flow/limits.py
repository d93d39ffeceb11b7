"""How long a flow's names and fields may be, so that every file a run names after them fits.

A flow's names reach file names: its job ``flow.<group>.<name>`` names its lease folder
(``_engine/leases/flow.<group>.<name>.<hop>``) and, joined with a DAG's name (``<hop>.<dataset>``),
the copy records and staged batches of its hops (``<job>.<dag>.b<batch>.<run id>.jsonl``). A file
name holds at most :data:`FILE_NAME_BYTES` bytes on the file systems the engine runs on, so
the budget is shared out: :data:`MAX_GROUP` + :data:`MAX_NAME` + :data:`MAX_DATASET` leave
:data:`HOP_BUDGET` characters for a hop's name. :func:`check_fits` checks the whole of each name a
flow's plan gives (a topology's edge names are the deployment's, and a template's DAG names too),
so a flow that compiles never names a file too long to create.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError

if TYPE_CHECKING:
    from engine.flow.compiler import FlowPlan

FILE_NAME_BYTES = 255
"""``NAME_MAX`` of Linux file systems (ext4, xfs, tmpfs) and of S3's key segments as Hadoop lists them."""
MAX_GROUP = 32
"""A flowGroup's characters (letters, digits, ``_`` and ``-``: one byte each)."""
MAX_NAME = 64
"""A flowName's characters."""
MAX_DATASET = 48
"""A dataset name's characters (a flow's ``datasets``)."""
MAX_OWNER = 64
"""An owner's (a user's) name."""
MAX_DESCRIPTION = 2000
"""A flow's ``description``."""
MAX_SCHEDULE = 200
"""A cron expression."""
MAX_REFERENCE = 129
"""A data node, executor or ``<pack>/<template>`` a flow names."""
MAX_DESTINATIONS = 32
MAX_TEMPLATES = 32
MAX_DATASETS = 500
MAX_PARALLELISM = 256
"""DAGs of one flow run at once on threads of one driver: more only queue."""
RUN_SUFFIX = len(".b000000.") + len("20260101T000000Z-0123abcd") + len(".jsonl")
"""What the engine appends to ``<job>.<dag>`` in the longest file name it makes: a batch number
and a run id (``engine.cli.app.new_run_id``), and the suffix."""
HOP_BUDGET = FILE_NAME_BYTES - RUN_SUFFIX - len("flow.") - 3 - MAX_GROUP - MAX_NAME - MAX_DATASET
"""What the other limits leave for a hop's name in ``flow.<group>.<name>.<hop>.<dataset>`` (63)."""


def check_fits(plan: FlowPlan) -> None:
    """Refuse a plan one of whose DAGs would name a file longer than :data:`FILE_NAME_BYTES`,
    naming the flow's key that counts most in it."""
    for hop in plan.hops:
        for dag in hop.dag_names().values():
            whole = f"{plan.job_name}.{dag}"
            if len(whole.encode()) + RUN_SUFFIX <= FILE_NAME_BYTES:
                continue
            dataset = next((d for d in plan.conf.datasets if dag.endswith(f".{d}")), "")
            key = "flow.datasets" if len(dataset) > len(plan.name) else "flow.flowName"
            raise ConfigError(
                f"flow `{plan.group}/{plan.name}`: its DAG `{dag}` would name files of {len(whole) + RUN_SUFFIX} "
                f"bytes (`{whole}.b<batch>.<run id>.jsonl`), and a file name holds at most {FILE_NAME_BYTES}: "
                "shorten the flow's name, its group's, or the dataset's (the hop's name is its edge's)",
                key=key,
                file=plan.file,
            )
