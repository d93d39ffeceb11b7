"""The config of flows, in the seed's terms (``gobblin-as-a-service.txt``): a FlowConfig, template
packs and templates, and the flow graph (data nodes, flow edges, executors). No pyspark here."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
"""A flow group or name, a node, edge, executor, pack or template name: it becomes part of job
and DAG names and of file paths."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _named(value: str, what: str) -> str:
    if not NAME.fullmatch(value):
        raise ValueError(f"{what} `{value}`: use letters, digits, `_` and `-` (not first)")
    return value


class FlowConf(_Strict):
    """A flow (the seed's FlowConfig): move ``datasets`` from the ``source`` data node to each of
    the ``destinations``, or run the ``templateUris`` in order. ``flowGroup``/``flowName`` default
    to the file's place, ``jobs/flows/<flowGroup>/<flowName>.conf``."""

    flow_group: str | None = Field(default=None, alias="flowGroup")
    """The flow's group (a namespace); with ``flowName`` it is the flow's key."""
    flow_name: str | None = Field(default=None, alias="flowName")
    """The flow's name, unique in its group."""
    description: str = ""
    owner: str | None = None
    """The principal the flow runs as: a template pack must allow it (``principals``)."""
    schedule: str = ""
    """A cron expression (``0 * * * *``), or empty for a flow run on demand; the flow service
    schedules it."""
    catchup: bool = False
    """Slots of the ``schedule`` missed while no flow service was scheduling: run once when it
    resumes (true) or skip them (false); either way the flow's schedule status says so."""
    run_immediately: bool = Field(default=False, alias="runImmediately")
    """Run once as soon as the flow is created or changed (the flow service)."""
    template_uris: list[str] = Field(default=[], alias="templateUris")
    """``<pack>/<template>`` names. Without ``source``: the hops, run in this order on
    ``executor``. With ``source``: only edges whose templates are all listed may be used."""
    source: str | None = None
    """The data node the datasets come from."""
    destinations: list[str] = Field(default_factory=list)
    """The data nodes they go to; hops shared by several destinations run once."""
    datasets: list[str] = Field(default_factory=list)
    """The datasets to move, given to each template as ``${params.datasets}``."""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Template parameters; they win over the edges' and the nodes' (README "Flows")."""
    executor: str | None = None
    """A flow without ``source`` (``templateUris`` only): the executor its hops run on; None:
    ``local``."""
    parallelism: int = Field(default=4, ge=1)
    """How many DAGs of the flow's hops run at once in this application."""

    @field_validator("flow_group", "flow_name")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return value if value is None else _named(value, "name")


class ParametersConf(_Strict):
    """A template's declared parameters."""

    required: list[str] = Field(default_factory=list)
    """Parameters a flow (or the edge or nodes it uses) must give, dotted (``source.path``)."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """Parameters that may be given, with their values when not."""
    description: dict[str, str] = Field(default_factory=dict)
    """What each parameter means (said when one is missing); dotted keys may nest."""

    @field_validator("description", mode="before")
    @classmethod
    def _flat(cls, value: Any) -> Any:
        return dict(_leaves(value)) if isinstance(value, dict) else value


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        out += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [(f"{prefix}{key}", value)]
    return out


class PackConf(_Strict):
    """A template pack (``jobs/templates/<pack>/pack.conf``): who owns it and who may use it."""

    description: str = ""
    owners: list[str] = Field(default_factory=list)
    """Users or ``group:<name>`` that own the pack; they may use it too."""
    principals: list[str] = Field(default_factory=list)
    """Users, ``group:<name>``, or ``*`` (anyone) allowed to use the pack's templates."""


class NodeConf(_Strict):
    """A data node: a database, a lake location, a bucket, a landing folder."""

    kind: str = "folder"
    """What it is (``database``, ``lake``, ``bucket``, ``folder``, ...): documentation only."""
    description: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Given to templates as ``${params.source.<key>}`` or ``${params.destination.<key>}``, by the
    node's role in the hop."""


class EdgeConf(_Strict):
    """A flow edge: data moves ``from`` -> ``to`` with ``templates``, on one of ``executors``."""

    from_: str = Field(alias="from")
    to: str
    templates: list[str] = Field(min_length=1)
    """``<pack>/<template>``: the jobs that move the data, run in this order."""
    executors: list[str] = Field(min_length=1)
    """The executors that may run it, by preference: the first is used."""
    cost: float = Field(default=1.0, gt=0)
    """The compiler takes the cheapest path (the sum of its edges' costs)."""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Template parameters: they win over the nodes' and lose to the flow's."""


class ExecutorConf(_Strict):
    """A Spark deployment that runs hops."""

    master: str
    """Its master URL: ``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://...``. A hop whose
    executor has the master of the running application (any ``local`` one for a local
    application) runs in it; another is submitted with ``spark-submit.sh --master``."""
    submit: list[str] = Field(default_factory=list)
    """More ``spark-submit.sh`` options (``--total-executor-cores``, ``2``, ``--conf``, ``k=v``)."""
    overrides: list[str] = Field(default_factory=list)
    """More ``key=value`` overrides for a submitted hop (``spark.conf.x=y``)."""
    description: str = ""


class TopologyConf(_Strict):
    """The flow graph: every ``conf/topology/*.conf|yaml`` file's keys, merged."""

    nodes: dict[str, NodeConf] = Field(default_factory=dict)
    edges: dict[str, EdgeConf] = Field(default_factory=dict)
    executors: dict[str, ExecutorConf] = Field(default_factory=dict)
