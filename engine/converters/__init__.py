"""Converters: a chain of steps compiled into Spark column expressions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.converters import conf
from engine.converters.conf import ConverterConf
from engine.plugins import PluginEntry, Registry

if TYPE_CHECKING:
    from engine.converters.base import Converter

_IMPL = "engine.converters.builtins"
CONVERTERS: Registry[ConverterConf, Converter] = Registry(
    "converter",
    {
        c.model_fields["type"].default: PluginEntry(c, f"{_IMPL}:{c.__name__.removesuffix('Conf')}Converter")
        for c in (
            conf.CastConf,
            conf.RenameConf,
            conf.SelectConf,
            conf.DropConf,
            conf.DeriveConf,
            conf.RequireConf,
            conf.CheckConf,
            conf.ExpectConf,
            conf.RegexConf,
            conf.ParseTimestampConf,
            conf.DedupeConf,
        )
    }
    | {
        "lookup": PluginEntry(conf.LookupConf, "engine.converters.lookup:LookupConverter"),
        "sql": PluginEntry(conf.SqlConf, "engine.converters.sql:SqlConverter"),
    },
)

__all__ = ["CONVERTERS"]
