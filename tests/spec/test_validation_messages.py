"""A validator's own words reach the user without pydantic's ``Value error, `` in front of them
(issue 58, item 19): in one error, in a list of several, and from a real plugin's check. No JVM."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from engine.errors import ConfigError
from engine.spec.validation import validate
from tests.helpers import compile_dict


class _Conf(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = 1
    name: str = "x"

    @field_validator("size")
    @classmethod
    def _positive(cls, size: int) -> int:
        if size < 1:
            raise ValueError("a size of at least 1")
        return size


def test_a_validators_message_is_shown_as_it_wrote_it() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(_Conf, {"size": 0}, key="job", file="j.conf")
    assert str(caught.value) == "a size of at least 1 (key `job.size`, file j.conf)"


def test_a_list_of_errors_has_no_pydantic_prefix_either() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(_Conf, {"size": 0, "nme": "y"}, key="job", file=None)
    said = str(caught.value)
    assert "`job.size`: a size of at least 1" in said and "`job.nme`: unknown key (did you mean `name`?)" in said
    assert "Value error" not in said


def test_a_plugins_own_check_reads_as_it_wrote_it(tmp_path: Path) -> None:
    job = {
        "sources": {"db": {"type": "jdbc", "url": "jdbc:postgresql://db/shop", "table": "t", "query": "SELECT 1"}},
        "sinks": {"out": {"type": "delta", "path": "out"}},
    }
    with pytest.raises(ConfigError) as caught:
        compile_dict(job, tmp_path)
    assert str(caught.value).startswith("give exactly one of `table` and `query` (key `job.sources.db`")
