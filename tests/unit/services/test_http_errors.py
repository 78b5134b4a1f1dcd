"""One error shape for every HTTP error (``services/api/errors.py``)."""

from __future__ import annotations

from services.api.errors import error_body, validation_errors


def test_every_detail_becomes_field_and_errors() -> None:
    assert error_body(401, "missing or invalid X-Api-Key") == {
        "detail": {
            "field": "X-Api-Key",
            "errors": [{"field": "X-Api-Key", "msg": "missing or invalid X-Api-Key", "type": "http_401"}],
        }
    }
    body = error_body(422, {"field": "author", "index": 3, "errors": [{"field": "author", "msg": "m", "type": "t"}]})
    assert body["detail"] == {"field": "author", "index": 3, "errors": [{"field": "author", "msg": "m", "type": "t"}]}
    assert error_body(404, None)["detail"]["field"] == "path"
    assert error_body(422, {"field": "X-Principal-Id", "msg": "bad"})["detail"]["errors"][0]["msg"] == "bad"


def test_validation_errors_drop_the_source_and_never_echo_unencodable_text() -> None:
    errs = validation_errors(
        [
            {"loc": ("body", "filters", "author"), "msg": "bad \ud800", "type": "string_type", "input": "\ud800"},
            {"loc": ("query", "as_of"), "msg": "m", "type": "t", "ctx": {"path": "x"}},
        ]
    )
    assert [e["field"] for e in errs] == ["filters.author", "as_of.x"]
    assert all("input" not in e for e in errs)
    for e in errs:
        e["msg"].encode("utf-8")
