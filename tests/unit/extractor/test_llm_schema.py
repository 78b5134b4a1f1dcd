"""LLM extraction, pure half: the registry-bound response format and defensive output parsing."""

from __future__ import annotations

import json
import logging

import pytest

from extractor.links import EntityRef
from extractor.llm_schema import (
    LLM_CONFIDENCE_CAP,
    build_messages,
    inspect_llm_output,
    parse_llm_output,
    response_format,
)
from services.errors import InvalidPayloadError
from services.taxonomy import load_registry

REGISTRY = load_registry()
TEXT = "Alice Smith is the VP of Engineering at Acme. Bob reports to Alice Smith."


def _item(**overrides: object) -> dict[str, object]:
    item: dict[str, object] = {
        "subject": {"type": "person", "name": "Bob"},
        "predicate": "reports_to",
        "object": {"type": "person", "name": "Alice Smith"},
        "value": None,
        "confidence": 0.8,
        "evidence": "Bob reports to Alice Smith",
    }
    item.update(overrides)
    return item


def test_response_format_is_bound_to_the_registry() -> None:
    fmt = response_format(REGISTRY)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    item = schema["properties"]["links"]["items"]
    assert item["properties"]["predicate"]["enum"] == list(REGISTRY.predicate_names)
    assert schema["$defs"]["entity"]["properties"]["type"]["enum"] == list(REGISTRY.entity_types)
    assert set(item["required"]) == set(item["properties"])  # strict mode: everything required
    assert item["additionalProperties"] is False
    json.dumps(fmt)  # serializable as a request body


def test_messages_list_predicates_with_types() -> None:
    system, user = build_messages(TEXT, REGISTRY)
    assert system["role"] == "system" and "reports_to: person -> person" in system["content"]
    assert "has_title: person -> literal value" in system["content"]
    assert user == {"role": "user", "content": TEXT}


def test_parses_valid_links_with_spans() -> None:
    reply = {
        "links": [
            _item(),
            _item(
                subject={"type": "person", "name": "Alice Smith"},
                predicate="has_title",
                object=None,
                value="VP of Engineering",
                evidence="VP of Engineering",
            ),
        ]
    }
    links = parse_llm_output(json.dumps(reply), REGISTRY, text=TEXT, offset=100)
    assert [(lk.subject.name, lk.predicate, lk.object, lk.value) for lk in links] == [
        ("Bob", "reports_to", EntityRef("person", "Alice Smith"), None),
        ("Alice Smith", "has_title", None, "VP of Engineering"),
    ]
    start = TEXT.index("Bob reports")
    assert links[0].span == (100 + start, 100 + start + len("Bob reports to Alice Smith"))
    assert all(lk.rule == "llm" for lk in links)


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (_item(predicate="likes"), "not in the registry"),
        (_item(subject={"type": "robot", "name": "R2"}), "subject type 'robot'"),
        (_item(object={"type": "team", "name": "Platform"}), "does not allow person -reports_to-> team"),
        (_item(predicate="has_title", object=None, value=None), "needs a literal value"),
        (_item(object=None), "object is not an entity object"),
        (_item(subject={"type": "person", "name": "The"}), "not an entity name"),
        (_item(subject={"type": "team", "name": "eid_13fdff84"}), "person id"),
        ("not an object", "item is not an object"),
    ],
)
def test_drops_and_reports_anything_outside_the_registry(item: object, reason: str) -> None:
    parsed = inspect_llm_output({"links": [item, _item()]}, REGISTRY)
    assert len(parsed.links) == 1
    (rejection,) = parsed.rejected
    assert rejection.index == 0 and reason in rejection.reason


def test_parse_logs_rejections(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="extractor.llm_schema"):
        links = parse_llm_output({"links": [_item(predicate="likes")]}, REGISTRY)
    assert links == []
    assert any(getattr(r, "reason", "").startswith("predicate 'likes'") for r in caplog.records)


def test_confidence_is_clamped_and_defaulted() -> None:
    high, missing = inspect_llm_output(
        {
            "links": [
                _item(confidence=7),
                _item(subject={"type": "person", "name": "Carol"}, confidence="high"),
            ]
        },
        REGISTRY,
    ).links
    assert high.confidence == LLM_CONFIDENCE_CAP and missing.confidence == 0.5


def test_eid_names_become_herb_identities_and_duplicates_collapse() -> None:
    reply = {
        "links": [
            _item(subject={"type": "person", "name": "@eid_13fdff84"}),
            _item(subject={"type": "person", "name": "eid_13fdff84"}, confidence=0.9),
        ]
    }
    (link,) = inspect_llm_output(reply, REGISTRY).links
    assert link.subject.identity == ("herb_eid", "eid_13fdff84") and link.confidence == 0.9


@pytest.mark.parametrize("reply", ["{not json", "[1, 2]", {"items": []}, {"links": "none"}])
def test_malformed_replies_raise_invalid_payload(reply: object) -> None:
    with pytest.raises(InvalidPayloadError):
        parse_llm_output(reply, REGISTRY)
