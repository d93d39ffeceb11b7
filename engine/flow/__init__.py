"""Flows (the Gobblin-as-a-Service seed): a FlowConfig compiled over the flow graph into the jobs
that serve it (:mod:`engine.flow.compiler`). Pure: no pyspark here."""

from engine.flow.compiler import FlowCompiler, FlowPlan, Hop
from engine.flow.load import compile_flow, flow_compiler

__all__ = ["FlowCompiler", "FlowPlan", "Hop", "compile_flow", "flow_compiler"]
