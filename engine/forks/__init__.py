"""Forks: split the converted records into branches (valid, error and named ones)."""

from engine.forks.fork import BranchCounts, Fork

__all__ = ["BranchCounts", "Fork"]
