"""Column names and values the engine reserves, shared by sources, converters, sinks and the
runtime (a module without imports, so every layer may import it)."""

DATASET = "__engine_dataset"
"""The dataset URN of each record, added by the source (state and counts are kept per dataset)."""

ERRORS = "__engine_errors"
"""The (step, reason) entries of a record's rejections: empty for a valid record."""

DROPPED = "__engine_dropped"
"""Whether a step dropped the record on purpose (counted, neither published nor rejected)."""

FILE = "__engine_file"
"""The file each record was read from (``""`` for sources that read no files): taken at the read,
where Spark still knows it, so that a rejected record's id in the error table can name its place.
A source may give it itself (a replay gives each record's id in the error table)."""

RECORD_ID = "record_id"
"""The error table's record id column, and the replay marks table's (:mod:`engine.sinks.error_table`)."""

ORIGIN = "origin"
"""The error table's column of where each record was read: its :data:`FILE` value (the file, ``""``
for sources that read none), a part of its ``record_id``."""
RECORD_BYTES = "record_bytes"
"""The error table's column of a rejected record as read, byte for byte, when it is not UTF-8
text (null otherwise): ``record`` then holds the text with each invalid sequence replaced by
U+FFFD, which every reader can read."""

READ_STEP = "read"
"""The step of a record the source could not parse, in the error table."""

SKIPPED_FILE = "file skipped (on_corrupt = skip)"
"""How the reason of a skipped file's error row starts (:mod:`engine.sources.corrupt_files`)."""
