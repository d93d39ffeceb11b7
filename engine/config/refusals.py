"""What Hydra refuses, as one :class:`~engine.errors.ConfigError` line.

Hydra reports a command line or a config it cannot compose in its own words, over several lines
(a missing job lists a search path; an unknown key quotes OmegaConf's ``full_key``/``object_type``;
a config file that does not parse shows a Python traceback). :func:`refusal` reads the exception
Hydra raised and says the same in one line, naming the key and with a did-you-mean where there is
a known name close to the one given: ``no job `demo/ordrs` in /x/jobs: did you mean `demo/orders`?``.
:func:`check_folders` refuses a missing jobs folder before Hydra, which would otherwise suggest
adding a ``+job`` key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from engine.config.defaults import FILLED
from engine.config.jobs_source import FLOW_GROUP, FLOWS_DIR, FLOWS_DIR_ENV, GROUP, SUFFIXES, flows_root
from engine.config.paths import jobs_root
from engine.config.redact import SECRET_KEY
from engine.errors import ConfigError, closest, did_you_mean

__all__ = ["check_folders", "refusal"]

JOBS_DIR_ENV = "ENGINE_JOBS_DIR"
TEMPLATES_DIR = "templates"
"""Where flows' template packs live in the jobs folder (:mod:`engine.flow.load`): no jobs there."""
_LISTED = 12
"""At most this many known names are listed when none is close to the one given."""
_HYDRA_TAIL = ("Config search path", "Set the environment variable HYDRA_FULL_ERROR", "See https://hydra.cc")


def check_folders(argv: Iterable[str]) -> None:
    """A ``job=`` or ``flow=`` choice needs the jobs folder (flows take their templates from it):
    a missing one is refused naming it."""
    chosen = {a.lstrip("+~").split("=", 1)[0] for a in argv if "=" in a}
    root = jobs_root()
    if chosen & {GROUP, FLOW_GROUP} and not root.is_dir():
        via = f" ({JOBS_DIR_ENV})" if os.environ.get(JOBS_DIR_ENV) else ""
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise ConfigError(f"the jobs folder {root}{via} {what}", key=GROUP)


def refusal(exc: BaseException) -> ConfigError:
    """``exc`` (what composing raised) as one config error line."""
    found = _engine_error(exc)
    if found is not None:
        return found
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        return _missing(str(exc.missing_cfg_file), list(exc.options or []))
    unknown = _unknown_key(exc)
    if unknown is not None:
        return unknown
    if isinstance(exc, OverrideParseException):
        cause = _first_line(exc.__cause__) if exc.__cause__ is not None else _first_line(exc)
        return ConfigError(
            f"cannot read the override `{exc.override}`: {cause} (see the README, Quoting override values)"
        )
    return ConfigError(_one_line(str(exc)))


def _engine_error(exc: BaseException) -> ConfigError | None:
    """The engine's own error that Hydra wrapped (a job file that does not parse), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConfigError):
            return seen
        seen = seen.__cause__
    return None


def _missing(path: str, options: list[str]) -> ConfigError:
    """A config group's choice with no file: a job, a flow, or another group's (``spark=...``)."""
    group, _, name = path.strip("'").partition("/")
    if group == GROUP:
        return _no_such(name, "job", jobs_root(), _names(jobs_root(), skip=(FLOWS_DIR, TEMPLATES_DIR)), JOBS_DIR_ENV)
    if group == FLOW_GROUP:
        return _no_such(name, "flow", flows_root(), _names(flows_root()), FLOWS_DIR_ENV)
    known = [o.split("/", 1)[-1] for o in options]
    hint = did_you_mean(name, known)
    listed = f"{hint}known: {', '.join(known)}" if known else "there is none"
    return ConfigError(f"no `{group}` config `{name}` ({listed})", key=group)


def _no_such(name: str, what: str, root: Path, known: list[str], env: str) -> ConfigError:
    hint = did_you_mean(name, known)
    if hint:
        advice = hint.rstrip(" ")
    elif known:
        more = ", ..." if len(known) > _LISTED else ""
        advice = f"known: {', '.join(known[:_LISTED])}{more}"
    else:
        advice = f"it holds no {what} file" if root.is_dir() else "that folder does not exist"
    via = f" ({env})" if os.environ.get(env) else ""
    files = f"{name}{SUFFIXES[0]}, {' or '.join(SUFFIXES[1:])}"  # orders.conf, .yaml or .yml
    return ConfigError(f"no {what} `{name}`: no {files} in {root}{via}; {advice}")


def _names(root: Path, *, skip: tuple[str, ...] = ()) -> list[str]:
    """The choices a folder offers: each config file's path under it, without its suffix."""
    if not root.is_dir():
        return []
    found = []
    for file in root.rglob("*"):
        rel = file.relative_to(root)
        if file.suffix in SUFFIXES and file.is_file() and not (rel.parts[0] in skip and len(rel.parts) > 1):
            found.append(rel.with_suffix("").as_posix())
    return sorted(found)


def _unknown_key(exc: BaseException) -> ConfigError | None:
    """An override of a key the config does not have (Hydra: "Could not override 'a.b.c'", with
    OmegaConf's "Key 'b' is not in struct" as its cause: ``b`` is the first part missing)."""
    cause = exc.__cause__
    if not isinstance(cause, OmegaConfBaseException) or "not in struct" not in str(cause):
        return None
    missing = str(getattr(cause, "full_key", "") or "")
    found = re.search(r"Could not override '([^']+)'", str(exc))
    override = found.group(1) if found else missing
    given = re.search(rf"use \+{re.escape(override)}=(\S*)", str(exc))
    value = given.group(1) if given else "..."
    if override in (GROUP, FLOW_GROUP):  # a group Hydra does not offer (no folder): its choice is missing
        return _missing(f"{override}/{value}", [])
    name = str(getattr(cause, "key", "") or missing.rsplit(".", 1)[-1])
    parent: Any = getattr(cause, "parent_node", None)
    known = [str(k) for k in parent if str(k) not in ("hydra", FILLED)] if parent is not None else []
    close = closest(name, known)
    prefix = missing[: -len(name)] if missing.endswith(name) else ""
    hint = f"did you mean `{prefix}{close}`? " if close else ""
    secret = SECRET_KEY.search(override) or (close is not None and SECRET_KEY.search(close))
    inside = f" (in `{override}`)" if override != missing else ""
    return ConfigError(
        f"unknown key `{missing}`{inside}: {hint}(a key no documentation has is added as "
        f"`+{override}={'...' if secret else value}`)"
    )


def _first_line(exc: BaseException) -> str:
    return _one_line(str(exc)).split("; ")[0]


def _one_line(text: str) -> str:
    """Hydra's message on one line: its lines joined, its pointers to search paths and to
    ``HYDRA_FULL_ERROR`` left out."""
    lines = []
    for line in text.splitlines():
        if line.strip().startswith(_HYDRA_TAIL):
            break
        if line.strip():
            lines.append(line.strip())
    return "; ".join(lines) or type(text).__name__
