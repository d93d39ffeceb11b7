"""Pydantic validation whose errors name the full key path and the config file."""

from __future__ import annotations

import difflib
import re
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from engine.errors import ConfigError, did_you_mean

M = TypeVar("M", bound=BaseModel)
_MAX_LISTED = 8


def validate(model: type[M], data: Any, *, key: str, file: str | None) -> M:
    """``model.model_validate(data)``, with errors turned into one :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping, got {type(data).__name__}", key=key, file=file)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()[:_MAX_LISTED]
        first_key = _join(key, _loc(errors[0]))
        if len(errors) == 1:
            message = _describe(model, errors[0])
        else:
            lines = [f"`{_join(key, _loc(e))}`: {_describe(model, e)}" for e in errors]
            message = "invalid config:\n  " + "\n  ".join(lines)
        raise ConfigError(message, key=first_key, file=file) from None


def _join(key: str, loc: tuple[Any, ...]) -> str:
    parts = [key]
    for item in loc:
        parts.append(f"[{item}]" if isinstance(item, int) else f".{item}")
    return "".join(parts).removeprefix(".")  # key "": the path starts at the top


def _loc(err: Any) -> tuple[Any, ...]:
    """Where an error is: a tagged union's unknown or missing tag is its discriminator key's fault
    (``datasets.type``, not ``datasets``)."""
    loc: tuple[Any, ...] = err["loc"]
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        found = re.fullmatch(r"'(\w+)'", str(err.get("ctx", {}).get("discriminator", "")))
        if found:
            return (*loc, found.group(1))
    return loc


def _describe(model: type[BaseModel], err: Any) -> str:
    kind = err["type"]
    if kind in ("missing", "union_tag_not_found"):
        return "missing required key"
    if kind == "union_tag_invalid":
        tag, known = str(err["ctx"]["tag"]), re.findall(r"'([^']*)'", str(err["ctx"]["expected_tags"]))
        hint = did_you_mean(tag, known)
        return f"unknown type `{tag}` ({hint}known: {', '.join(known)})"
    if kind == "extra_forbidden":
        known = _known_keys(model, err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
        hint = f" (did you mean `{close[0]}`?)" if close else f" (known keys: {', '.join(sorted(known))})"
        return f"unknown key{hint}"
    return _own_words(err)


_PYDANTIC_PREFIX = re.compile(r"^(Value error|Assertion failed), ")
"""What pydantic puts before the message of a ``ValueError`` or an ``assert`` a validator raised."""


def _own_words(err: Any) -> str:
    """The message a validator wrote, without pydantic's ``Value error, `` in front of it."""
    if err["type"] in ("value_error", "assertion_error") and "error" in err.get("ctx", {}):
        return str(err["ctx"]["error"])
    return _PYDANTIC_PREFIX.sub("", str(err["msg"]))


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys a (possibly nested) model accepts at ``loc``."""
    current: Any = model
    for item in loc:
        fields = getattr(current, "model_fields", {})
        field = fields.get(item) or next((f for f in fields.values() if f.alias == item), None)
        if field is None:
            return _field_names(current)
        models = [a for a in (field.annotation, *get_args(field.annotation)) if isinstance(a, type)]
        models = [a for a in models if issubclass(a, BaseModel)]
        if len(models) != 1:  # not a model, or a union of several (the error's loc names the member)
            return _field_names(current)
        current = models[0]
    return _field_names(current)


def _field_names(model: Any) -> list[str]:
    fields = getattr(model, "model_fields", {})
    return [f.alias or name for name, f in fields.items()]
