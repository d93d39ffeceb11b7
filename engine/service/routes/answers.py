"""The API's answers, as pydantic models, so that ``/openapi.json`` shows each route's response. A
flow's answer is its FlowConfig, whose keys are the flow's own: the service's keys are declared, the
rest pass through as given (secrets redacted). Each route answers only the keys its handler gave
(:class:`~engine.service.routes.deps.ServiceRoute`): a declared key left out is not added."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Answer(BaseModel):
    """An answer of exactly its declared keys."""

    model_config = ConfigDict(extra="forbid")


class OpenAnswer(BaseModel):
    """An answer of its declared keys and others passed through (a FlowConfig's)."""

    model_config = ConfigDict(extra="allow")


class Health(Answer):
    status: str
    version: str
    leader: bool
    """This instance holds the scheduler's lease."""


class Me(Answer):
    name: str
    groups: list[str]
    admin: bool


class FlowAnswer(OpenAnswer):
    """A stored flow: its FlowConfig and where it stands."""

    flowGroup: str
    flowName: str
    version: int
    """0 for a flow file."""
    origin: str
    """``api`` or ``file``."""
    changedBy: str | None = None
    changedAt: str | None = None
    file: str | None = None
    """The flow file defining it (origin ``file``)."""
    flowExecutionId: str | None = None
    """The execution ``runImmediately`` started."""


class FlowSummary(FlowAnswer):
    """A flow as a list shows it: its key, version and summary keys (not its properties or datasets)."""

    owner: Any = None
    description: Any = None
    """Cut at 200 characters (the flow itself has it whole)."""
    schedule: Any = None
    source: Any = None
    destinations: Any = None
    templateUris: Any = None
    runImmediately: Any = None
    catchup: Any = None


class FlowVersion(FlowAnswer):
    """A version in a flow's history."""

    action: str
    """``create``, ``update`` or ``delete``."""


class Deleted(Answer):
    flowGroup: str
    flowName: str
    version: int
    deleted: bool


class JobSpecs(OpenAnswer):
    """A flow's compiled plan: each hop's template, executor and final job config."""

    flowGroup: str
    flowName: str
    job: str | None = None
    routes: Any = None
    hops: list[dict[str, Any]] = []


class FlowSchedule(OpenAnswer):
    """A flow's schedule, its next slot and the scheduler's last decisions, newest first."""

    flowGroup: str
    flowName: str
    schedule: str
    catchup: bool
    nextRunTime: str | None = None
    decisions: list[dict[str, Any]] = []


class FlowGroup(Answer):
    flowGroup: str
    owners: list[str]


class ExecutionStatus(OpenAnswer):
    """An execution's FlowStatus: the service's row and the flow's own."""

    flowExecutionId: str
    flowGroup: str
    flowName: str
    flowVersion: int | None = None
    executionStatus: str | None = None
    message: str | None = None
    requestedBy: str | None = None
    trigger: str | None = None
    exitCode: int | None = None
    executionStartTime: int | None = None
    """Milliseconds since the epoch."""
    executionEndTime: int | None = None
    jobStatuses: list[dict[str, Any]] = []
    processedCount: int = 0
    errorCount: int = 0


class CancelRequested(ExecutionStatus):
    cancelRequested: bool
