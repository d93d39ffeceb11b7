"""The only package that imports pyhocon, omegaconf and hydra."""

from engine.config.app import AppConfig, run_app

__all__ = ["AppConfig", "run_app"]
