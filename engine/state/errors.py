"""Errors about the metadata tables themselves: lost (a deleted state table) or damaged (a log
entry that cannot be read). Both exit 2 like a config error: the operator must act, and nothing
has been written when they are raised."""

from __future__ import annotations

from engine.errors import ConfigError

START_OVER = "start_over"
"""The ``checkpoint.action`` that acknowledges lost state: every dataset of a DAG is read again."""


class StateLostError(ConfigError):
    """A DAG's state is missing or empty although other metadata shows it committed batches: the
    run would read everything again. ``evidence`` says what showed it."""

    def __init__(self, *, job: str, dag: str, scope: str, table: str, evidence: list[str]) -> None:
        self.job, self.dag, self.scope, self.table, self.evidence = job, dag, scope, table, evidence
        super().__init__(
            f"In job `{job}`, DAG `{dag}` (scope {scope}): the state table {table} is missing or holds no "
            f"watermark of this DAG, but {' and '.join(evidence)}, so the state was lost, and running now would "
            "read every dataset again from its beginning. Nothing was read or written. Restore the table "
            f"(a backup of {table}; or, if a Delta commit deleted its rows, Delta time travel: "
            f"RESTORE TABLE delta.`{table}` TO VERSION AS OF <version before it>), or, to start over on "
            f"purpose, acknowledge it: mode=checkpoint checkpoint.action={START_OVER} checkpoint.dag={dag} "
            'checkpoint.reason="..." (with this run\'s job= and warehouse=)',
            file=table,
        )


class MetadataDamagedError(ConfigError):
    """A metadata table whose Delta log holds an entry that cannot be read."""

    def __init__(self, *, what: str, table: str, entry: str, problem: str, newest: bool) -> None:
        self.what, self.table, self.entry, self.problem, self.newest = what, table, entry, problem, newest
        if newest:
            remedy = (
                "Restore that file from a backup. If there is none and the entry is a write cut off by a crash "
                "(the newest entry, as this one is), moving it out of _delta_log undoes that one write: "
                "see the README, Troubleshooting, for what that costs per table"
            )
        else:
            remedy = (
                "Restore that file (or the whole table) from a backup: it is not the newest entry, so removing "
                "it would break the table"
            )
        super().__init__(
            f"the {what} metadata table {table} is damaged: its log entry {entry} {problem}. "
            f"Nothing was written. {remedy}",
            file=entry,
        )


class FileLogLostError(ConfigError):
    """A files dataset's watermark says runs read and logged files, but the file log has none of
    them: every file before the watermark would look late and be read again."""

    def __init__(self, *, key: str, dataset: str, watermark: str, value: str) -> None:
        self.dataset, self.watermark = dataset, watermark
        super().__init__(
            f"dataset {dataset} has a watermark ({watermark}) that runs reached by reading files, but the file "
            "log (_engine/files_read) holds none of its files: it was deleted or lost, or the source's path is "
            "spelled another way than when they were read (s3:// and s3a://, another host name). Running now "
            "would read every file before the watermark again. Nothing was read or written. Restore the file "
            "log from a backup, or spell the path as before; or, to count every file at or before the "
            "watermark as read (a file delivered late and never read is then skipped too), set the watermark "
            f"to itself: mode=checkpoint checkpoint.action=set checkpoint.dataset='{dataset}' "
            f"checkpoint.value='{value}' checkpoint.reason=\"...\"",
            key=key,
        )
