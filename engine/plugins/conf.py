"""The base of every plugin config: typed, frozen, and strict about unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PluginConf(BaseModel):
    """A plugin's validated config. Unknown keys are errors; every field has a one-line doc."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    type: str
    """The registry key that chose this plugin."""
