"""Pure validation helpers shared by every contract (``schemas/validation.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schemas.validation import MAX_JSON_DEPTH, Rejected, load_json, scan, storable, too_deep, utc_in_range


def test_too_deep_scans_any_depth_without_recursion_and_names_the_item() -> None:
    assert too_deep('{"a": [1, {"b": 2}]}') is None
    assert too_deep("[" * 1_000_000 + "]" * 1_000_000) == "0.0"
    assert too_deep('{"s": "[[[[{{{{", "x": {"y": ' + "[" * 70 + "]" * 70 + "}}") == "x.y"
    assert too_deep('{"a": 1, "b": [0, 1, ' + "{" * 70) == "b.2"
    assert too_deep('{"k\\"[": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}") is None


def test_load_json_refuses_what_cannot_round_trip() -> None:
    for raw, kind in [(b"\xff", "invalid_utf8"), (b'{"a": NaN}', "json_invalid"), (b"{", "json_invalid")]:
        with pytest.raises(Rejected) as info:
            load_json(raw)
        assert info.value.type == kind and info.value.field == "body"
    assert load_json('{"a": "\\ud800"}') == {"a": "\ud800"}  # parsed; refused by scan, naming the path


def test_scan_names_the_path_of_unstorable_keys_and_values() -> None:
    for obj, field in [
        ({"a": {"b": ["ok", "x\x00"]}}, "a.b.1"),
        ({"a": {"\ud800": 1}}, "a.\\ud800"),
        ({"a": float("inf")}, "a"),
    ]:
        with pytest.raises(Rejected) as info:
            scan(obj, max_depth=10)
        assert info.value.field == field
        info.value.errors[0]["msg"].encode("utf-8")  # always renderable
    scan({"a": ["fine", 1, 2.5, None, {"b": True}]}, max_depth=10)
    assert storable("ok") == "ok"


def test_utc_in_range_moves_to_utc_first_and_never_overflows() -> None:
    assert utc_in_range(datetime(2024, 1, 1)) == datetime(2024, 1, 1, tzinfo=UTC)
    assert utc_in_range(datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == datetime(
        2024, 1, 1, tzinfo=UTC
    )
    for bad in [
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2))),  # overflows when moved to UTC
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        datetime(9500, 1, 1, tzinfo=UTC),
    ]:
        with pytest.raises(ValueError):
            utc_in_range(bad)
