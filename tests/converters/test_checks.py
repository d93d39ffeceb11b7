"""The checks Spark's analysis lets through, on real Spark: each refuses what Spark would refuse
(or silently cast) once a task runs, accepts what it would accept, and runs no Spark job."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from engine.converters.checks import boolean, check_datetime_pattern, compile_regex
from engine.errors import ConfigError


@pytest.fixture
def no_job(spark: Any) -> Iterator[None]:
    """Fails the test if anything in it ran a Spark job."""
    group = "checks-run-no-job"
    spark.sparkContext.setJobGroup(group, group)
    yield
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize(
    ("sql", "found"),
    [
        pytest.param("arr_delay >> 60", "int", id="shift"),
        pytest.param("arr_delay", "int", id="int-column"),
        pytest.param("carrier", "string", id="string-column"),
        pytest.param("NULL", "void", id="null"),
        pytest.param("arr_delay > 60", None, id="comparison"),
        pytest.param("carrier IS NULL OR arr_delay BETWEEN 0 AND 5", None, id="boolean-logic"),
        pytest.param("flag", None, id="boolean-column"),
    ],
)
def test_only_a_boolean_expression_is_a_condition(spark: Any, no_job: None, sql: str, found: str | None) -> None:
    frame = spark.createDataFrame([], "arr_delay INT, carrier STRING, flag BOOLEAN")
    if found is None:
        boolean(frame, sql, key="job.forks.late", what="branch `late`")
        return
    with pytest.raises(ConfigError, match=f"branch `late`: `.*` is of type {found}, not boolean") as info:
        boolean(frame, sql, key="job.forks.late", what="branch `late`")
    assert info.value.key == "job.forks.late"


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        pytest.param("[a-", "Illegal character range", id="open-range"),
        pytest.param("(ab", "Unclosed group", id="open-group"),
        pytest.param("a)|(b", "Unmatched closing ')'", id="escapes-the-whole-value-group"),
        pytest.param("\\Qa.b", "as the whole-value match", id="unterminated-quote"),
        pytest.param("*a", "Dangling meta character", id="dangling"),
        pytest.param("[^@\\s]+@[^@\\s]+\\.[a-z]+", None, id="email"),
        pytest.param("\\d{4}-\\d{2}", None, id="counts"),
    ],
)
def test_a_regex_must_compile_in_java(spark: Any, no_job: None, pattern: str, needle: str | None) -> None:
    if needle is None:
        compile_regex(spark, pattern, key="k.pattern", what="converter `regex`")
        return
    said = f"converter `regex`: the regular expression .* does not compile.*{re.escape(needle)}"
    with pytest.raises(ConfigError, match=said):
        compile_regex(spark, pattern, key="k.pattern", what="converter `regex`")


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        pytest.param("yyyy-MM-dd QQQQQQ", "INVALID_DATETIME_PATTERN.ILLEGAL_CHARACTER", id="illegal-letter"),
        pytest.param("yyyy-MM-dd'T", "INVALID_DATETIME_PATTERN", id="unclosed-quote"),
        pytest.param("YYYY-ww", "Fail to recognize 'YYYY-ww' pattern", id="week-based"),
        pytest.param("yyyy-MM-dd e", "week-based character: e", id="week-day"),
        pytest.param("yyyy-MM-dd HH:mm:ss", None, id="plain"),
        pytest.param("dd/MM/yyyy hh:mm a", None, id="am-pm"),
        pytest.param("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", None, id="iso-offset"),
    ],
)
def test_a_datetime_pattern_must_be_one_spark_parses_with(
    spark: Any, no_job: None, pattern: str, needle: str | None
) -> None:
    if needle is None:
        check_datetime_pattern(spark, pattern, key="k.format", what="converter `ts`")
        return
    said = f"converter `ts`: Spark refuses the datetime pattern {re.escape(repr(pattern))}: .*{re.escape(needle)}"
    with pytest.raises(ConfigError, match=said):
        check_datetime_pattern(spark, pattern, key="k.format", what="converter `ts`")


def test_a_datetime_pattern_is_checked_under_the_sessions_own_parser_policy(spark: Any) -> None:
    """A job whose SQL settings choose Spark's legacy parser may use the patterns it accepts."""
    legacy = spark.newSession()
    legacy.conf.set("spark.sql.legacy.timeParserPolicy", "LEGACY")
    check_datetime_pattern(legacy, "YYYY-ww", key="k", what="w")
    with pytest.raises(ConfigError, match="YYYY-ww"):
        check_datetime_pattern(spark, "YYYY-ww", key="k", what="w")
