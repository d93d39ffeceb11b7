"""Watermarks: stored JSON round trips, ordering per kind, and values typed on the command line."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from engine.errors import ConfigError
from engine.state.watermarks import (
    FileWatermark,
    LongWatermark,
    MultiLongWatermark,
    TimestampWatermark,
    Watermark,
    parse,
    parse_cli,
)

T0 = datetime(2026, 11, 1, 10, 0, 0)
T0_MS = 1_793_527_200_000
"""``T0`` as epoch milliseconds (UTC)."""


@pytest.mark.parametrize(
    "watermark",
    [
        LongWatermark(42),
        LongWatermark(-1),
        TimestampWatermark(datetime(2026, 11, 1, 10, 0, 0, 123456)),
        MultiLongWatermark((3, 0, 17)),
        MultiLongWatermark(()),
        FileWatermark(T0_MS, "in/b.json"),
        FileWatermark(T0_MS, "in/b.json", recent=("in/a.json", "in/late.json")),
        FileWatermark(T0_MS, "in/b.json", floor=(T0_MS - 5, "in/a.json")),
        FileWatermark(T0_MS, "in/b.json", recent=("in/a.json",), legacy=True),
    ],
    ids=repr,
)
def test_every_kind_survives_a_json_round_trip(watermark: Watermark) -> None:
    text = watermark.to_json()
    assert json.loads(text)["kind"] == watermark.kind
    back = parse(text)
    assert back == watermark
    assert type(back) is type(watermark)


def test_stored_json_is_a_small_kind_value_object() -> None:
    assert json.loads(LongWatermark(7).to_json()) == {"kind": "long", "value": 7}
    assert json.loads(TimestampWatermark(T0).to_json()) == {"kind": "timestamp", "value": "2026-11-01 10:00:00"}
    assert json.loads(MultiLongWatermark((1, 2)).to_json()) == {"kind": "multi_long", "value": [1, 2]}
    assert json.loads(FileWatermark(5, "p").to_json()) == {
        "kind": "file",
        "value": {"mtime_ms": 5, "path": "p", "floor": None},
    }
    assert json.loads(FileWatermark(5, "p", floor=(3, "o")).to_json())["value"]["floor"] == [3, "o"]


def test_a_file_watermark_stored_before_the_file_log_parses_as_legacy_and_stays_so() -> None:
    """Stored without ``floor`` (by an engine that kept the look-back window's paths instead)."""
    old = {"kind": "file", "value": {"mtime_ms": 5, "path": "p", "recent": ["q"]}}
    mark = parse(json.dumps(old))
    assert mark == FileWatermark(5, "p", ("q",), legacy=True)
    assert json.loads(mark.to_json()) == old  # re-stored (a plan, a status row) as it was
    assert parse(json.dumps({"kind": "file", "value": {"mtime_ms": 5, "path": "p"}})) == FileWatermark(
        5, "p", (), legacy=True
    )


def test_a_tz_aware_timestamp_is_kept_as_naive_utc() -> None:
    aware = datetime(2026, 11, 1, 12, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    watermark = TimestampWatermark(aware)
    assert watermark.value == T0
    assert watermark.value.tzinfo is None
    assert watermark == TimestampWatermark(T0)
    assert parse(watermark.to_json()) == TimestampWatermark(T0)


def test_a_stored_timestamp_with_an_offset_parses_as_naive_utc() -> None:
    text = json.dumps({"kind": "timestamp", "value": "2026-11-01T05:00:00-05:00"})
    assert parse(text) == TimestampWatermark(T0)


def test_parse_of_nothing_is_no_watermark() -> None:
    assert parse(None) is None
    assert parse("") is None


def test_parse_refuses_an_unknown_stored_kind() -> None:
    with pytest.raises(ConfigError, match="unknown watermark kind `offset`"):
        parse(json.dumps({"kind": "offset", "value": 1}))


def test_long_and_timestamp_order_by_value_and_never_across_kinds() -> None:
    assert LongWatermark(1).at_most(LongWatermark(2))
    assert LongWatermark(2).at_most(LongWatermark(2))
    assert not LongWatermark(3).at_most(LongWatermark(2))
    early, late = TimestampWatermark(T0), TimestampWatermark(T0 + timedelta(microseconds=1))
    assert early.at_most(late)
    assert early.at_most(early)
    assert not late.at_most(early)
    assert not LongWatermark(1).at_most(MultiLongWatermark((5,)))
    assert not MultiLongWatermark((1,)).at_most(LongWatermark(5))
    assert not TimestampWatermark(T0).at_most(LongWatermark(T0_MS))


def test_multi_long_orders_element_wise() -> None:
    assert MultiLongWatermark((1, 2, 3)).at_most(MultiLongWatermark((1, 2, 3)))
    assert MultiLongWatermark((1, 2, 3)).at_most(MultiLongWatermark((1, 5, 3)))
    assert not MultiLongWatermark((1, 6, 3)).at_most(MultiLongWatermark((1, 5, 3)))
    # ahead on one partition, behind on another: ordered neither way
    ahead, behind = MultiLongWatermark((2, 0)), MultiLongWatermark((0, 2))
    assert not ahead.at_most(behind)
    assert not behind.at_most(ahead)


def test_multi_long_of_different_lengths_is_not_comparable() -> None:
    short, long_ = MultiLongWatermark((1, 2)), MultiLongWatermark((1, 2, 3))
    assert not short.at_most(long_)
    assert not long_.at_most(short)


def test_file_watermark_orders_by_mtime_then_path_ignoring_recent() -> None:
    assert FileWatermark(1, "z").at_most(FileWatermark(2, "a"))
    assert not FileWatermark(2, "a").at_most(FileWatermark(1, "z"))
    assert FileWatermark(5, "a").at_most(FileWatermark(5, "b"))
    assert not FileWatermark(5, "b").at_most(FileWatermark(5, "a"))
    assert FileWatermark(5, "a", ("x", "y")).at_most(FileWatermark(5, "a"))
    assert not FileWatermark(5, "a").at_most(LongWatermark(10))


def test_file_watermark_displays_its_utc_time_and_path() -> None:
    assert FileWatermark(T0_MS + 45, "in/b.json").display() == "2026-11-01 10:00:00.045 in/b.json"


def test_parse_cli_long() -> None:
    assert parse_cli("long", "42") == LongWatermark(42)
    assert parse_cli("long", " -3 ") == LongWatermark(-3)


def test_parse_cli_timestamp_accepts_dates_and_converts_offsets_to_utc() -> None:
    assert parse_cli("timestamp", "2026-11-01 10:00:00") == TimestampWatermark(T0)
    assert parse_cli("timestamp", "2026-11-01T10:00:00Z") == TimestampWatermark(T0)
    assert parse_cli("timestamp", "2026-11-01T11:30:00+01:30") == TimestampWatermark(T0)
    assert parse_cli("timestamp", "2026-11-01") == TimestampWatermark(datetime(2026, 11, 1))


def test_parse_cli_multi_long_as_json_list_or_commas() -> None:
    assert parse_cli("multi_long", "[1, 2, 3]") == MultiLongWatermark((1, 2, 3))
    assert parse_cli("multi_long", "4,5, 6") == MultiLongWatermark((4, 5, 6))
    assert parse_cli("multi_long", "7") == MultiLongWatermark((7,))


def test_parse_cli_file_as_epoch_ms_and_path() -> None:
    assert parse_cli("file", f"{T0_MS}|in/b.json") == FileWatermark(T0_MS, "in/b.json")


def test_parse_cli_file_as_iso_timestamp_and_path_is_utc() -> None:
    assert parse_cli("file", "2026-11-01 10:00:00|in/b.json") == FileWatermark(T0_MS, "in/b.json")
    assert parse_cli("file", "2026-11-01T10:00:00.250|in/b.json") == FileWatermark(T0_MS + 250, "in/b.json")
    assert parse_cli("file", "2026-11-01T12:00:00+02:00|in/b.json") == FileWatermark(T0_MS, "in/b.json")


def test_parse_cli_file_keeps_pipes_in_the_path() -> None:
    assert parse_cli("file", "5|dir/a|b.json") == FileWatermark(5, "dir/a|b.json")


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("long", "forty-two"),
        ("long", "1.5"),
        ("long", ""),
        ("timestamp", "yesterday"),
        ("timestamp", "2026-13-01"),
        ("multi_long", "[1, 2"),
        ("multi_long", "1,x"),
        ("multi_long", "[[1]]"),
        ("file", "soon|in/b.json"),
        ("file", "-5|in/b.json"),
    ],
)
def test_parse_cli_refuses_bad_values_naming_the_value_key(kind: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_cli(kind, text)
    assert info.value.key == "checkpoint.value"
    assert f"not a {kind} watermark" in info.value.message


def test_parse_cli_names_the_key_it_is_given() -> None:
    with pytest.raises(ConfigError) as info:
        parse_cli("long", "x", key="backfill.from")
    assert info.value.key == "backfill.from"


def test_parse_cli_refuses_an_unknown_kind_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        parse_cli("offset", "1")
    assert "unknown watermark kind `offset`" in info.value.message
    for kind in ("long", "timestamp", "multi_long", "file"):
        assert kind in info.value.message
