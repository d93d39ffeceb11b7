"""The documented keys a job leaves out, with their defaults: what makes ``key=value`` work for them.

Hydra refuses an override of a key the composed config does not have, and a job file names only
the keys it sets. :func:`documented_defaults` lists, for a plain job (as read from its file), every
key the typed configs document and the job leaves out: the job's and each DAG's own
(:class:`~engine.spec.model.JobConf`, :class:`~engine.spec.model.DagConf`, the fan-out's template),
and each source's, converter's and sink's, looked up by its ``type`` in the plugin registries.
``engine.config`` fills them in before overrides apply and removes the ones still at their default
afterwards, so what compiles is what the file and the command line say.

Keys inside a node the job leaves out are filled with the node (``publish``, ``limits``); a node
whose default is unset (``partitions``, ``fan_out``) is filled as null, its keys with ``+``.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from engine.converters import CONVERTERS
from engine.errors import ConfigError
from engine.plugins import Registry
from engine.sinks import SINKS
from engine.sources import SOURCES
from engine.spec.model import DagConf, FanOutConf, JobConf

KeyPath = tuple[str | int, ...]


def documented_defaults(job: dict[str, Any]) -> list[tuple[KeyPath, Any]]:
    """Each documented key ``job`` leaves out (its path inside the job) with its default, as plain data."""
    found: list[tuple[KeyPath, Any]] = []
    _dag(JobConf, job, (), found)
    for name, dag in _mapping(job.get("dags")).items():
        _dag(DagConf, dag, ("dags", name), found)
    fan_out = job.get("fan_out")
    if isinstance(fan_out, dict):
        _model(FanOutConf, fan_out, ("fan_out",), found)
        _dag(DagConf, fan_out.get("template"), ("fan_out", "template"), found)
    return found


def _dag(model: type[BaseModel], dag: Any, at: KeyPath, found: list[tuple[KeyPath, Any]]) -> None:
    if not isinstance(dag, dict):
        return
    _model(model, dag, at, found)
    for kind, registry in (("sources", SOURCES), ("sinks", SINKS)):
        for name, node in _mapping(dag.get(kind)).items():
            _plugin(registry, node, (*at, kind, name), found)
    converters = dag.get("converters")
    for i, node in enumerate(converters if isinstance(converters, list) else []):
        _plugin(CONVERTERS, node, (*at, "converters", i), found)


def _plugin(registry: Registry[Any, Any], node: Any, at: KeyPath, found: list[tuple[KeyPath, Any]]) -> None:
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        return
    try:
        conf = registry.get(node["type"]).conf
    except ConfigError:  # an unknown type: compiling the job says so, with the key
        return
    _model(conf, node, at, found)


def _model(model: type[BaseModel], node: dict[str, Any], at: KeyPath, found: list[tuple[KeyPath, Any]]) -> None:
    """The fields of ``model`` that ``node`` leaves out, and those of nested models it gives."""
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in node:
            nested = _single_model(field.annotation)
            if nested is not None and isinstance(node[key], dict):
                _model(nested, node[key], (*at, key), found)
        elif not field.is_required():
            default = field.get_default(call_default_factory=True)
            found.append(((*at, key), to_jsonable_python(default, by_alias=True)))


def _single_model(annotation: Any) -> type[BaseModel] | None:
    """The one model a field holds (``X`` or ``X | None``), else ``None`` (a union of several models,
    or a mapping of them, whose keys are names rather than fields)."""
    union = get_origin(annotation) in (Union, types.UnionType)
    candidates = get_args(annotation) if union else (annotation,)
    options = [a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)]
    return options[0] if len(options) == 1 else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
