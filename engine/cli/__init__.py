"""The command line: Hydra app, exit codes, the run summary."""

from engine.cli.app import main

__all__ = ["main"]
