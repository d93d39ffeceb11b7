"""Only transient errors are retried: the engine's own say so, foreign ones are Delta's commit
conflicts as py4j and delta-rs raise them (class names and messages as they appear). No JVM: the
py4j-side exceptions are stand-ins of the same class name and text."""

from __future__ import annotations

import pytest
from deltalake.exceptions import CommitFailedError, DeltaError
from pyspark.errors import AnalysisException

from engine.commit.errors import StepFailed
from engine.copy.errors import ListingError
from engine.errors import ConfigError, EngineError, TransientError
from engine.state.conflicts import is_transient
from engine.state.delta_table import retry_conflicts


def foreign(cls: str, message: str) -> Exception:
    """An exception of class ``cls`` (as pyspark or py4j would name it) saying ``message``."""
    return type(cls, (Exception,), {})(message)


JAVA = "An error occurred while calling o412.execute.\n: "


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        pytest.param(
            foreign(
                "ConcurrentAppendException",
                "[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] ConcurrentAppendException: Files were added to the root "
                "of the table by a concurrent update. Please try the operation again.",
            ),
            True,
            id="delta-spark-concurrent-append",
        ),
        pytest.param(
            foreign(
                "Py4JJavaError",
                JAVA + "io.delta.exceptions.ConcurrentDeleteReadException: [DELTA_CONCURRENT_DELETE_READ] "
                "This transaction attempted to read one or more files that were deleted by a concurrent update.",
            ),
            True,
            id="py4j-concurrent-delete-read",
        ),
        pytest.param(
            foreign(
                "Py4JJavaError",
                JAVA + "org.apache.spark.sql.delta.DeltaConcurrentDeleteDeleteException: a concurrent delete",
            ),
            True,
            id="py4j-internal-class",
        ),
        pytest.param(
            foreign("MetadataChangedException", "[DELTA_METADATA_CHANGED] MetadataChangedException: The metadata"),
            True,
            id="metadata-changed",
        ),
        pytest.param(
            foreign("ProtocolChangedException", "[DELTA_PROTOCOL_CHANGED] ProtocolChangedException: The protocol"),
            True,
            id="protocol-changed",
        ),
        pytest.param(
            foreign("ConcurrentWriteException", "[DELTA_CONCURRENT_WRITE] ConcurrentWriteException: A concurrent"),
            True,
            id="concurrent-write",
        ),
        pytest.param(
            foreign("ConcurrentTransactionException", "[DELTA_CONCURRENT_TRANSACTION] This error occurs when"),
            True,
            id="concurrent-transaction",
        ),
        pytest.param(
            foreign(
                "Py4JJavaError",
                JAVA + "org.apache.hadoop.fs.FileAlreadyExistsException: /wh/_engine/state/_delta_log/"
                "00000000000000000003.json already exists",
            ),
            True,
            id="hadoop-log-entry-exists",
        ),
        pytest.param(
            foreign(
                "AnalysisException",
                "[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table ('delta.`/wh/_engine/runs`'). "
                "The associated location ('/wh/_engine/runs') is not empty and also not a Delta table.",
            ),
            True,
            id="table-being-created",
        ),
        pytest.param(
            CommitFailedError("Transaction failed: Exceeded max number of commit attempts"), True, id="delta-rs"
        ),
        pytest.param(DeltaError("Generic error: Failed to read delta log object"), False, id="delta-rs-other"),
        pytest.param(
            foreign("AnalysisException", "[PATH_NOT_FOUND] Path does not exist: file:/wh/in."),
            False,
            id="path-not-found",
        ),
        pytest.param(foreign("Py4JJavaError", JAVA + "java.io.IOException: No space left on device"), False, id="io"),
        pytest.param(ValueError("bad value"), False, id="value-error"),
        pytest.param(TransientError("another writer"), True, id="engine-transient"),
        pytest.param(EngineError("ConcurrentAppendException in a message"), False, id="engine-says-no"),
        pytest.param(ConfigError("bad key", key="a"), False, id="config-error"),
        pytest.param(ListingError("cannot list"), False, id="listing-error"),
    ],
)
def test_which_errors_are_transient(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_the_moved_errors_are_engine_errors() -> None:
    assert issubclass(StepFailed, EngineError) and issubclass(ListingError, EngineError)
    assert not StepFailed.transient


@pytest.mark.parametrize(
    ("error", "racing", "calls"),
    [
        pytest.param(foreign("ConcurrentAppendException", "[DELTA_CONCURRENT_APPEND]"), False, 3, id="conflict"),
        pytest.param(ValueError("no"), False, 1, id="other"),
        pytest.param(AnalysisException(message="[DELTA_MISSING_DELTA_TABLE] half made"), False, 1, id="spark-error"),
        pytest.param(
            AnalysisException(message="[DELTA_MISSING_DELTA_TABLE] half made"), True, 3, id="spark-error-racing"
        ),
        pytest.param(ValueError("no"), True, 1, id="python-error-racing"),
        pytest.param(TypeError("'JavaPackage' object is not callable"), True, 1, id="missing-jar-racing"),
        pytest.param(ConfigError("no"), True, 1, id="engine-error-racing"),
        pytest.param(TransientError("again"), False, 3, id="engine-transient"),
    ],
)
def test_retry_conflicts_retries_transient_errors_only(
    error: Exception, racing: bool, calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engine.state.delta_table.time.sleep", lambda _: None)
    seen: list[int] = []

    def action() -> str:
        seen.append(1)
        if len(seen) < 3:
            raise error
        return "done"

    if calls == 3:
        assert retry_conflicts(action, what="t", racing=racing) == "done"
    else:
        with pytest.raises(type(error)):
            retry_conflicts(action, what="t", racing=racing)
    assert len(seen) == calls
