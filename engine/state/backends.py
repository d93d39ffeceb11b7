"""How the engine reaches its metadata tables (``metadata.backend``), named where compiling a job
(no JVM) can check the key and :func:`engine.state.delta_table.meta_table` can act on it."""

AUTO = "auto"
BACKENDS = (AUTO, "spark", "delta_rs")
"""``auto``: delta-rs on the local file system, Spark elsewhere; ``spark``: always Spark (a Spark
job per read or write); ``delta_rs``: always delta-rs (a local warehouse only, so far)."""
