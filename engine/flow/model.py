"""The config of flows, in the seed's terms (``gobblin-as-a-service.txt``): a FlowConfig, template
packs and templates, and the flow graph (data nodes, flow edges, executors). No pyspark here."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic_core import PydanticCustomError

from engine.flow import limits

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
"""A flow group or name, a node, edge, executor, pack or template name: it becomes part of job
and DAG names and of file paths."""
DATASET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
"""A dataset a flow lists: one name, never a path (it is placed into the templates' paths, so
``..``, ``/`` or a leading ``.`` would lead elsewhere)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _named(value: str, what: str) -> str:
    if not NAME.fullmatch(value):
        raise ValueError(f"{what} `{value}`: use letters, digits, `_` and `-` (not first)")
    return value


def _dataset(value: str) -> str:
    if not DATASET.fullmatch(value):
        raise PydanticCustomError(
            "dataset_name",
            "dataset `{value}`: a dataset is a name (letters, digits, `_`, `.` and `-`, not `.` or `-` first), "
            "not a path: templates place it into their paths",
            {"value": value},
        )
    return value


Dataset = Annotated[str, StringConstraints(max_length=limits.MAX_DATASET), AfterValidator(_dataset)]
Reference = Annotated[str, StringConstraints(max_length=limits.MAX_REFERENCE)]
"""A data node, executor or template a flow names (checked against the topology afterwards)."""


class FlowConf(_Strict):
    """A flow (the seed's FlowConfig): move ``datasets`` from the ``source`` data node to each of
    the ``destinations``, or run the ``templateUris`` in order. ``flowGroup``/``flowName`` default
    to the file's place, ``jobs/flows/<flowGroup>/<flowName>.conf``.

    Every value is taken only as its own type (``strict``): ``"yes"`` or ``1`` is no boolean and
    ``4.0`` no count, as a flow arrives from anyone the flow service lets in. The sizes are
    :mod:`engine.flow.limits`'s."""

    model_config = ConfigDict(strict=True)

    flow_group: str | None = Field(default=None, alias="flowGroup", max_length=limits.MAX_GROUP)
    """The flow's group (a namespace); with ``flowName`` it is the flow's key."""
    flow_name: str | None = Field(default=None, alias="flowName", max_length=limits.MAX_NAME)
    """The flow's name, unique in its group."""
    description: str = Field(default="", max_length=limits.MAX_DESCRIPTION)
    owner: str | None = Field(default=None, max_length=limits.MAX_OWNER)
    """The principal the flow runs as: a template pack must allow it (``principals``)."""
    schedule: str = Field(default="", max_length=limits.MAX_SCHEDULE)
    """A cron expression (``0 * * * *``), or empty for a flow run on demand; the flow service
    schedules it."""
    catchup: bool = False
    """Slots of the ``schedule`` missed while no flow service was scheduling: run once when it
    resumes (true) or skip them (false); either way the flow's schedule status says so."""
    run_immediately: bool = Field(default=False, alias="runImmediately")
    """Run once as soon as the flow is created or changed (the flow service)."""
    template_uris: list[Reference] = Field(default=[], alias="templateUris", max_length=limits.MAX_TEMPLATES)
    """``<pack>/<template>`` names. Without ``source``: the hops, run in this order on
    ``executor``. With ``source``: only edges whose templates are all listed may be used."""
    source: Reference | None = None
    """The data node the datasets come from."""
    destinations: list[Reference] = Field(default_factory=list, max_length=limits.MAX_DESTINATIONS)
    """The data nodes they go to; hops shared by several destinations run once."""
    datasets: list[Dataset] = Field(default_factory=list, max_length=limits.MAX_DATASETS)
    """The datasets to move, given to each template as ``${params.datasets}``: names, never paths."""
    properties: dict[str, Any] = Field(default_factory=dict)
    """Template parameters; they win over the edges' and the nodes' (README "Flows")."""
    executor: Reference | None = None
    """A flow without ``source`` (``templateUris`` only): the executor its hops run on; None:
    ``local``."""
    parallelism: int = Field(default=4, ge=1, le=limits.MAX_PARALLELISM)
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


class RootConf(_Strict):
    """A place the hops of flows the flow service stores may read, and with ``write`` also write,
    besides the warehouse (:mod:`engine.flow.roots`): for the hops from or into the data nodes it
    names, for every hop of the flow groups it names, or for every hop when it names neither.

    .. code-block:: hocon

        roots {
          landing { paths = ["/data/landing"], nodes = [landing] }          # read by its hops
          sales_out { paths = ["s3a://sales-out/"], groups = [sales], write = true }
        }
    """

    paths: list[str] = Field(min_length=1)
    """Folders or URL prefixes (``/data/landing``, ``s3a://bucket/prefix``) and everything below
    them; a relative one lies under the warehouse."""
    nodes: list[str] = Field(default_factory=list)
    """Data nodes: a hop from or into one of them may use the root."""
    groups: list[str] = Field(default_factory=list)
    """Flow groups: every hop of their flows may use the root."""
    write: bool = False
    """Whether the hops may also write there (else they only read)."""
    description: str = ""


class TopologyConf(_Strict):
    """The flow graph: every ``conf/topology/*.conf|yaml`` file's keys, merged."""

    nodes: dict[str, NodeConf] = Field(default_factory=dict)
    edges: dict[str, EdgeConf] = Field(default_factory=dict)
    executors: dict[str, ExecutorConf] = Field(default_factory=dict)
    roots: dict[str, RootConf] = Field(default_factory=dict)
