"""What a FlowConfig must pass before the service stores it: the same compiler as the CLI (over the
service's flow graph and templates), confined to the roots the graph allows (:mod:`engine.flow.roots`),
names and values within the declared sizes (:mod:`engine.flow.limits`), a cron schedule, no ``${``
(a stored flow is data, and a run reads it as a config file that would substitute it), and no
secret in plain text.

A value under a secret-looking key (``password``, ``token``, ...: :data:`engine.config.redact.SECRET_KEY`)
is stored as ``ENC(...)`` with the deployment's master key (``ENGINE_MASTER_KEY_FILE``), which the
run decrypts; the API answers it redacted. An update that sends a secret back redacted keeps the
stored one.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]

from engine.config.redact import REDACTED, SECRET_KEY
from engine.config.secrets import MASTER_KEY_ENV, encrypt, master_key
from engine.errors import ConfigError
from engine.flow import FlowCompiler, FlowPlan, flow_compiler
from engine.flow.limits import MAX_GROUP, MAX_NAME, MAX_OWNER, MAX_SCHEDULE
from engine.flow.model import NAME
from engine.service.errors import Invalid

ENC_PREFIX = "ENC("
MAX_KEY_CHARS = 200
"""A key anywhere in a FlowConfig (a property's name)."""
MAX_VALUE_CHARS = 8192
"""A text value anywhere in a FlowConfig (a property's value; the fields of its own have smaller limits)."""
MAX_ITEMS = 1000
"""A list or object anywhere in a FlowConfig."""


class FlowChecks:
    """The compilers for the service's life (each keeps what it compiled), used one request at a
    time: a confined one for the flows stored through the API, and one for the flows defined as
    files (the deployment's own, not confined, as their runs are not: :mod:`engine.flow.load`)."""

    def __init__(self, *, warehouse: str, topology: str | None) -> None:
        self.compiler: FlowCompiler = flow_compiler(warehouse=warehouse, topology=topology, confined=True)
        self._files: FlowCompiler | None = None
        self._where = (warehouse, topology)
        self._lock = threading.Lock()

    def compile(
        self, config: dict[str, Any], group: str, name: str, *, groups: tuple[str, ...], file: bool = False
    ) -> FlowPlan:
        """``config``'s plan, or :class:`Invalid` naming the key path of its first mistake;
        ``file``: the config is a flow file's."""
        raw = {k: v for k, v in config.items() if k not in ("flowGroup", "flowName")}
        try:
            with self._lock:
                return self._compiler(file).compile(raw, group=group, name=name, file=None, groups=groups)
        except ConfigError as exc:
            raise Invalid(exc.message, key=_body_key(exc.key)) from exc

    def _compiler(self, file: bool) -> FlowCompiler:
        if not file:
            return self.compiler
        if self._files is None:
            self._files = flow_compiler(warehouse=self._where[0], topology=self._where[1])
        return self._files


def check_names(group: str, name: str) -> None:
    """A flow's group and name: they become file and folder names (refused before any lookup)."""
    check_group(group)
    check_name(name, "flowName", MAX_NAME)


def check_group(group: str) -> None:
    """A flow group's name, as a flow names it (``PUT /flowgroups/{group}`` too)."""
    check_name(group, "flowGroup", MAX_GROUP)


def check_name(value: str, key: str, most: int) -> None:
    if len(value) > most:
        raise Invalid(f"`{value[:40]}...` ({len(value)} characters): a {key} has at most {most} characters", key=key)
    if not NAME.fullmatch(value):
        raise Invalid(f"{key} `{value}`: use letters, digits, `_` and `-` (not first)", key=key)


def check_shape(config: Any, group: str, name: str) -> dict[str, Any]:
    """A FlowConfig object naming ``group``/``name`` (or neither), a valid schedule, an owner that
    is a name, no ``${`` and no ``ENC(...)`` (a secret is sent as itself, and sealed here)."""
    if not isinstance(config, dict):
        raise Invalid(f"a FlowConfig is a JSON object, not {type(config).__name__}")
    for key, expected in (("flowGroup", group), ("flowName", name)):
        given = config.get(key, expected)
        if given != expected:
            raise Invalid(f"`{given}`: a flow's {key} cannot change (it is `{expected}`)", key=key)
    check_names(group, name)
    _only_data(config, "")
    schedule = config.get("schedule") or ""
    if isinstance(schedule, str) and len(schedule) > MAX_SCHEDULE:
        raise Invalid(f"a schedule has at most {MAX_SCHEDULE} characters ({len(schedule)} given)", key="schedule")
    if not isinstance(schedule, str) or (schedule and not _fires(schedule)):
        raise Invalid(
            f"`{schedule}` is not a cron expression (minute hour day month weekday, and seconds as a sixth)",
            key="schedule",
        )
    if "owner" in config:
        owner = config["owner"]
        if not isinstance(owner, str) or len(owner) > MAX_OWNER or not NAME.fullmatch(owner):
            shown = json.dumps(owner)[:80]
            raise Invalid(f"{shown}: the owner is a user's name (or leave `owner` out)", key="owner")
    return {**config, "flowGroup": group, "flowName": name}


def _fires(schedule: str) -> bool:
    """A cron expression that parses and fires at some time (``0 0 30 2 *`` parses but never does)."""
    if not croniter.is_valid(schedule):
        return False
    try:
        croniter(schedule).get_next()
    except Exception:
        return False
    return True


MAX_DEPTH = 32
"""How deeply a FlowConfig may nest (a deeper one is refused before anything walks it)."""


def _only_data(value: Any, key: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise Invalid(f"a FlowConfig may nest at most {MAX_DEPTH} levels", key=key)
    if isinstance(value, (dict, list)) and len(value) > MAX_ITEMS:
        raise Invalid(f"at most {MAX_ITEMS} entries ({len(value)} given)", key=key or None)
    if isinstance(value, dict):
        for k, v in value.items():
            if len(str(k)) > MAX_KEY_CHARS:
                raise Invalid(f"`{str(k)[:40]}...`: a key has at most {MAX_KEY_CHARS} characters", key=key or None)
            _only_data(v, f"{key}.{k}" if key else str(k), depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _only_data(v, f"{key}[{i}]", depth + 1)
    elif isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        raise Invalid(f"a value has at most {MAX_VALUE_CHARS} characters ({len(value)} given)", key=key)
    elif isinstance(value, str) and "${" in value:
        raise Invalid("a stored flow may not hold `${`: give the value itself", key=key)
    elif isinstance(value, str) and value.strip().startswith(ENC_PREFIX):
        raise Invalid(
            f"send a secret as itself (the service encrypts it) or as `{REDACTED}` to keep the stored one, "
            "not as ENC(...)",
            key=key,
        )


def seal_secrets(config: Any, previous: Any = None, key: str = "", *, secret: bool = False) -> Any:
    """``config`` with every value under a secret-looking key, at any depth, encrypted
    (``ENC(...)``); one sent back as :data:`REDACTED` keeps ``previous``'s value at that place."""
    if isinstance(config, dict):
        before = previous if isinstance(previous, dict) else {}
        return {
            k: seal_secrets(
                v, before.get(k), f"{key}.{k}" if key else str(k), secret=secret or bool(SECRET_KEY.search(str(k)))
            )
            for k, v in config.items()
        }
    if isinstance(config, list):
        items = previous if isinstance(previous, list) else []
        return [
            seal_secrets(v, items[i] if i < len(items) else None, f"{key}[{i}]", secret=secret)
            for i, v in enumerate(config)
        ]
    if not secret or config is None or config == "":
        return config
    if config == REDACTED:
        if not isinstance(previous, str) or not previous.startswith(ENC_PREFIX):
            raise Invalid(f"`{REDACTED}` stands for a stored secret, but this flow has none here", key=key)
        return previous
    if not isinstance(config, str):
        raise Invalid("a secret is a string (it is stored encrypted)", key=key)
    try:
        master = master_key()
    except ConfigError as exc:
        why = exc.message if os.environ.get(MASTER_KEY_ENV) else f"{MASTER_KEY_ENV} is not set"
        raise Invalid(
            "a secret-looking value is never stored in plain text: give the service a master key "
            f"({MASTER_KEY_ENV}; spark-submit.sh mode=new_key writes one): {why}",
            key=key,
        ) from None
    return encrypt(config, master)


def hide_secrets(value: Any, *, secret: bool = False) -> Any:
    """What the API answers: every value under a secret-looking key, at any depth, and every
    ``ENC(...)`` value anywhere, as :data:`REDACTED`."""
    if isinstance(value, dict):
        return {k: hide_secrets(v, secret=secret or bool(SECRET_KEY.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_secrets(v, secret=secret) for v in value]
    if value is None or value == "":
        return value
    if secret or (isinstance(value, str) and value.strip().startswith(ENC_PREFIX)):
        return REDACTED
    return value


def _body_key(key: str | None) -> str | None:
    """The compiler's key path (``flow.properties.x``) as the request body's (``properties.x``)."""
    return key.removeprefix("flow.") if key and key.startswith("flow.") else key
