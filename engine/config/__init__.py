"""The only package that imports pyhocon, omegaconf and hydra."""

from engine.config.app import AppConfig, run_app
from engine.config.defaults import DocumentedDefaults

__all__ = ["AppConfig", "DocumentedDefaults", "run_app"]
