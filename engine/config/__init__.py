"""The only package that imports pyhocon, omegaconf and hydra.

Imported lazily: the launcher reads :mod:`engine.config.paths` and :mod:`engine.config.secrets`
before any job is composed, and must not pay for importing Hydra.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config.app import AppConfig, run_app
    from engine.config.defaults import DocumentedDefaults

_WHERE = {
    "AppConfig": "engine.config.app",
    "run_app": "engine.config.app",
    "DocumentedDefaults": "engine.config.defaults",
}
__all__ = ["AppConfig", "DocumentedDefaults", "run_app"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
