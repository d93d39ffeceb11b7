"""Two sinks of a job that write one place are refused while compiling (issue 58, item 3): two Delta
sinks on one path (however spelled) held the rows twice, a Delta and a Parquet sink on one path
made a folder a Parquet reader read doubled. No JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError
from tests.helpers import compile_dict

SOURCE = {"in": {"type": "files", "format": "json", "path": "/in", "schema": "id INT"}}


def job(**sinks: dict[str, Any]) -> dict[str, Any]:
    return {"sources": SOURCE, "sinks": sinks}


@pytest.mark.parametrize(
    ("sinks", "key", "how"),
    [
        pytest.param(
            {"a": {"type": "delta", "path": "x"}, "b": {"type": "delta", "path": "x"}},
            "job.sinks.b.path",
            "the same place",
            id="two-delta-sinks",
        ),
        pytest.param(
            {"a": {"type": "delta", "path": "x"}, "b": {"type": "delta", "path": "x/"}},
            "job.sinks.b.path",
            "the same place",
            id="x-and-x-slash",
        ),
        pytest.param(
            {"a": {"type": "delta", "path": "x"}, "b": {"type": "parquet", "path": "./y/../x"}},
            "job.sinks.b.path",
            "the same place",
            id="delta-and-parquet-spelled-apart",
        ),
        pytest.param(
            {"a": {"type": "delta", "path": "x"}, "b": {"type": "parquet", "path": "x/extract"}},
            "job.sinks.b.path",
            "nested places",
            id="one-inside-the-other",
        ),
        pytest.param(
            {"a": {"type": "delta", "path": "x"}, "b": {"type": "delta", "path": "{lake}/x"}},
            "job.sinks.b.path",
            "the same place",
            id="relative-and-absolute",
        ),
    ],
)
def test_two_sinks_of_one_place_are_refused_naming_both(
    tmp_path: Path, sinks: dict[str, Any], key: str, how: str
) -> None:
    for conf in sinks.values():
        conf["path"] = conf["path"].replace("{lake}", str(tmp_path))
    with pytest.raises(ConfigError) as refused:
        compile_dict(job(**sinks), tmp_path)
    assert refused.value.key == key, str(refused.value)
    assert "sink `a` (key `job.sinks.a.path`" in str(refused.value) and how in str(refused.value)


def test_two_dags_of_a_job_on_one_place_are_refused(tmp_path: Path) -> None:
    dags = {
        "one": {"sources": SOURCE, "sinks": {"lake": {"type": "delta", "path": "orders"}}},
        "two": {"sources": SOURCE, "sinks": {"lake": {"type": "delta", "path": "orders"}}},
    }
    with pytest.raises(ConfigError, match=r"sink `lake` .* and sink `lake` .* write the same place") as refused:
        compile_dict({"dags": dags}, tmp_path)
    assert refused.value.key == "job.dags.two.sinks.lake.path"


def test_two_jdbc_sinks_on_one_table_are_refused_and_the_url_login_is_never_shown(tmp_path: Path) -> None:
    db = {"type": "jdbc", "url": "jdbc:postgresql://scott:tiger@db/shop", "table": "public.orders"}
    with pytest.raises(ConfigError) as refused:
        compile_dict(job(a=dict(db), b={**db, "table": "PUBLIC.ORDERS"}), tmp_path)
    assert refused.value.key == "job.sinks.b.table"
    assert "tiger" not in str(refused.value) and "public.orders at jdbc:postgresql://db/shop" in str(refused.value)


def test_places_apart_pass(tmp_path: Path) -> None:
    spec = compile_dict(
        job(a={"type": "delta", "path": "x"}, b={"type": "parquet", "path": "xy"}, c={"type": "console"}), tmp_path
    )
    assert [s.name for s in spec.dags[0].sinks] == ["a", "b", "c"]


def test_two_dags_appending_their_own_records_to_one_table_say_so_on_both_sinks(tmp_path: Path) -> None:
    dags = {
        "eu": {"sources": SOURCE, "sinks": {"lake": {"type": "delta", "path": "orders", "shared": True}}},
        "us": {"sources": SOURCE, "sinks": {"lake": {"type": "delta", "path": "orders/", "shared": True}}},
    }
    assert [d.name for d in compile_dict({"dags": dags}, tmp_path).dags] == ["eu", "us"]
    dags["us"]["sinks"]["lake"]["shared"] = False  # type: ignore[index]
    with pytest.raises(ConfigError, match="set `shared = true` on both"):
        compile_dict({"dags": dags}, tmp_path)
