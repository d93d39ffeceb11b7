"""The request bodies of the API, as pydantic models: each field's type and limits are declared where
it is, so FastAPI checks them and ``/openapi.json`` shows them. A FlowConfig declares the fields the
service itself checks (and a few the compiler checks, for the schema); the compiler checks every
other key and refuses an unknown one, naming it. Models are strict: no ``"yes"`` for true, no
``"4"`` or ``4.0`` for a count (issue 58, item 12)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from engine.flow.limits import (
    MAX_DATASETS,
    MAX_DESCRIPTION,
    MAX_DESTINATIONS,
    MAX_GROUP,
    MAX_NAME,
    MAX_OWNER,
    MAX_PARALLELISM,
    MAX_SCHEDULE,
    MAX_TEMPLATES,
)
from engine.flow.model import NAME
from engine.service.access import GROUP_PREFIX

NAME_PATTERN = f"^{NAME.pattern}$"
MAX_OWNERS = 64
"""Owners of one flow group."""

FlowGroupName = Annotated[
    str, Field(max_length=MAX_GROUP, pattern=NAME_PATTERN, description="a flow group: letters, digits, `_`, `-`")
]
FlowName = Annotated[
    str, Field(max_length=MAX_NAME, pattern=NAME_PATTERN, description="a flow's name: letters, digits, `_`, `-`")
]
UserName = Annotated[str, Field(max_length=MAX_OWNER, pattern=NAME_PATTERN, description="a user's name")]
Principal = Annotated[
    str, Field(max_length=len(GROUP_PREFIX) + MAX_OWNER, description="a user's name, or group:<name>")
]


class RequestBody(BaseModel):
    """A request's body: an object of its declared keys only, each of its own type."""

    model_config = ConfigDict(strict=True, extra="forbid")
    what: ClassVar[str] = "the body"
    """What the body is, as a refusal names it (``a FlowConfig needs `flowName```)."""
    asked: ClassVar[str] = "the body is a JSON object"
    """The refusal of a body that is no object at all."""


class _FlowConfigFields(RequestBody):
    model_config = ConfigDict(strict=True, extra="allow")
    what: ClassVar[str] = "a FlowConfig"
    asked: ClassVar[str] = "a FlowConfig is a JSON object"

    owner: UserName | None = None
    """The user the flow runs as (left out: the one it has, or the sender for a new flow)."""
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION)] | None = None
    schedule: Annotated[str, Field(max_length=MAX_SCHEDULE, description="cron, seconds as a sixth field")] | None = None
    source: str | None = None
    """The data node the flow reads."""
    destinations: Annotated[list[Any], Field(max_length=MAX_DESTINATIONS)] | None = None
    datasets: Annotated[list[Any], Field(max_length=MAX_DATASETS)] | None = None
    templateUris: Annotated[list[Any], Field(max_length=MAX_TEMPLATES)] | None = None
    properties: dict[str, Any] | None = None
    """The templates' properties; a secret-looking one is stored encrypted and answered redacted."""
    runImmediately: bool | None = None
    catchup: bool | None = None
    parallelism: Annotated[int, Field(ge=1, le=MAX_PARALLELISM)] | None = None


class NewFlowConfig(_FlowConfigFields):
    """A new flow (``POST /flowconfigs``): it names its group and name."""

    flowGroup: FlowGroupName
    flowName: FlowName


class FlowConfigVersion(_FlowConfigFields):
    """A flow's next version (``PUT /flowconfigs/{group}/{name}``): its names, if given, are the path's."""

    flowGroup: FlowGroupName | None = None
    flowName: FlowName | None = None


class FlowGroupOwners(RequestBody):
    """A flow group's owners (``PUT /flowgroups/{group}``): ``{"owners": ["alice", "group:analysts"]}``."""

    what: ClassVar[str] = "a flow group's owners"
    asked: ClassVar[str] = 'give the owners: {"owners": ["alice", "group:analysts"]}'

    owners: Annotated[list[Principal], Field(max_length=MAX_OWNERS)]


class ExecutionRequest(RequestBody):
    """The flow to run (``POST /flowexecutions``)."""

    what: ClassVar[str] = "a flow to run"
    asked: ClassVar[str] = 'give the flow to run: {"flowGroup": ..., "flowName": ...}'

    flowGroup: FlowGroupName
    flowName: FlowName
