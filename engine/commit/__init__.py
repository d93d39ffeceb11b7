"""The publish protocol: commit steps, commit sequences in a write-ahead log, recovery, the lease.

See ``docs/architecture.md`` (exactly-once publishing) for how the pieces fit together.
"""
