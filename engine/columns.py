"""Column names the engine reserves, shared by sources, converters and the runtime."""

DATASET = "__engine_dataset"
"""The dataset URN of each record, added by the source (state and counts are kept per dataset)."""
