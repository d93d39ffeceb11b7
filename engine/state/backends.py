"""How the engine reaches its metadata tables (``metadata.backend``), named where compiling a job
(no JVM) can check the key and :func:`engine.state.delta_table.meta_table` can act on it."""

AUTO = "auto"
BACKENDS = (AUTO, "spark", "delta_rs")
"""``auto``: delta-rs on the local file system and on S3, Spark elsewhere (HDFS, GCS, Azure: untested
with delta-rs here); ``spark``: always Spark (a Spark job per read or write); ``delta_rs``: always
delta-rs (with the store's settings from the run's connection or the environment)."""

RUST_SCHEMES = ("s3", "s3a")
"""Object stores ``auto`` reaches with delta-rs (what the tests prove), beside local paths
(delta-rs does not know Hadoop's old ``s3n`` name: Spark reaches those)."""
