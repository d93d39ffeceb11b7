"""The flow service (the Gobblin-as-a-Service seed's self service): an HTTP API over the same flow
compiler as the CLI, FlowConfigs kept in Delta with every version, users with bearer tokens and
flow groups with owners, and executions run as ``spark-submit.sh flow=...`` subprocesses. Started
by ``serve.sh`` (:mod:`engine.service.cli`). No pyspark here: the store is read with delta-rs."""
