"""Column names the engine reserves, shared by sources, converters and the runtime."""

DATASET = "__engine_dataset"
"""The dataset URN of each record, added by the source (state and counts are kept per dataset)."""

FILE = "__engine_file"
"""The file each record was read from (``""`` for sources that read no files): taken at the read,
where Spark still knows it, so that a rejected record's id in the error table can name its place.
A source may give it itself (a replay gives each record's id in the error table)."""
