"""What a FlowConfig must pass before the service stores it: the same compiler as the CLI (over the
service's flow graph and templates), a cron schedule, no ``${`` (a stored flow is data, and a run
reads it as a config file that would substitute it), and no secret in plain text.

A value under a secret-looking key (``password``, ``token``, ...: :data:`engine.config.redact.SECRET_KEY`)
is stored as ``ENC(...)`` with the deployment's master key (``ENGINE_MASTER_KEY_FILE``), which the
run decrypts; the API answers it redacted. An update that sends a secret back redacted keeps the
stored one.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]

from engine.config.redact import REDACTED, SECRET_KEY
from engine.config.secrets import MASTER_KEY_ENV, encrypt, master_key
from engine.errors import ConfigError
from engine.flow import FlowCompiler, FlowPlan, flow_compiler
from engine.flow.model import NAME
from engine.service.errors import Invalid

ENC_PREFIX = "ENC("


class FlowChecks:
    """One compiler for the service's life (it keeps what it compiled), used one request at a time."""

    def __init__(self, *, warehouse: str, topology: str | None) -> None:
        self.compiler: FlowCompiler = flow_compiler(warehouse=warehouse, topology=topology)
        self._lock = threading.Lock()

    def compile(self, config: dict[str, Any], group: str, name: str, *, groups: tuple[str, ...]) -> FlowPlan:
        """``config``'s plan, or :class:`Invalid` naming the key path of its first mistake."""
        raw = {k: v for k, v in config.items() if k not in ("flowGroup", "flowName")}
        try:
            with self._lock:
                return self.compiler.compile(raw, group=group, name=name, file=None, groups=groups)
        except ConfigError as exc:
            raise Invalid(exc.message, key=_body_key(exc.key)) from exc


def check_shape(config: Any, group: str, name: str) -> dict[str, Any]:
    """A FlowConfig object naming ``group``/``name`` (or neither), a valid schedule, no ``${``."""
    if not isinstance(config, dict):
        raise Invalid(f"a FlowConfig is a JSON object, not {type(config).__name__}")
    for key, expected in (("flowGroup", group), ("flowName", name)):
        given = config.get(key, expected)
        if given != expected:
            raise Invalid(f"`{given}`: a flow's {key} cannot change (it is `{expected}`)", key=key)
        if not isinstance(given, str) or not NAME.fullmatch(given):
            raise Invalid(f"`{given}`: use letters, digits, `_` and `-` (not first)", key=key)
    _no_substitution(config, "")
    schedule = config.get("schedule") or ""
    if not isinstance(schedule, str) or (schedule and not croniter.is_valid(schedule)):
        raise Invalid(
            f"`{schedule}` is not a cron expression (five fields: minute hour day month weekday)", key="schedule"
        )
    return {**config, "flowGroup": group, "flowName": name}


def _no_substitution(value: Any, key: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _no_substitution(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_substitution(v, f"{key}[{i}]")
    elif isinstance(value, str) and "${" in value:
        raise Invalid("a stored flow may not hold `${`: give the value itself", key=key)


def seal_secrets(config: Any, previous: Any = None, key: str = "") -> Any:
    """``config`` with every plain value under a secret-looking key encrypted (``ENC(...)``); one
    sent back as :data:`REDACTED` keeps ``previous``'s value at that place."""
    if isinstance(config, dict):
        mapping = previous if isinstance(previous, dict) else {}
        return {k: _seal(v, mapping.get(k), f"{key}.{k}" if key else str(k), str(k)) for k, v in config.items()}
    if isinstance(config, list):
        items = previous if isinstance(previous, list) else []
        return [seal_secrets(v, items[i] if i < len(items) else None, f"{key}[{i}]") for i, v in enumerate(config)]
    return config


def _seal(value: Any, previous: Any, path: str, name: str) -> Any:
    if not SECRET_KEY.search(name) or isinstance(value, (dict, list)):
        return seal_secrets(value, previous, path)
    if value == REDACTED:
        if previous is None:
            raise Invalid(f"`{REDACTED}` stands for a stored secret, but this flow has none here", key=path)
        return previous
    if not isinstance(value, str) or value.startswith(ENC_PREFIX) or not value:
        return value
    try:
        key = master_key()
    except ConfigError as exc:
        why = exc.message if os.environ.get(MASTER_KEY_ENV) else f"{MASTER_KEY_ENV} is not set"
        raise Invalid(
            "a secret-looking value is never stored in plain text: give the service a master key "
            f"({MASTER_KEY_ENV}; spark-submit.sh mode=new_key writes one) or send the value as ENC(...): {why}",
            key=path,
        ) from None
    return encrypt(value, key)


def _body_key(key: str | None) -> str | None:
    """The compiler's key path (``flow.properties.x``) as the request body's (``properties.x``)."""
    return key.removeprefix("flow.") if key and key.startswith("flow.") else key
