"""Registry-bound structured fields → claims; unknown or malformed fields are rejected, never dropped."""

from __future__ import annotations

import pytest

from extractor.links import EntityRef
from extractor.structured import (
    MAX_VALUE_CHARS,
    StructuredClaim,
    partition_structured_fields,
    structured_claims,
)
from services.errors import InvalidPayloadError, PermanentError
from services.taxonomy import load_registry

REGISTRY = load_registry()


def test_bound_fields_map_to_predicates() -> None:
    claims = structured_claims(
        {
            "title": "  VP of   Engineering ",
            "manager": "eid_9B023657",
            "team": ["Platform", {"type": "division", "name": "Core Infra"}, "Platform"],
            "location": "San Francisco",
            "employer": {"name": "Acme", "identity": ["domain", "acme.com"]},
        },
        REGISTRY,
    )
    assert claims == [
        StructuredClaim("title", "has_title", None, "VP of Engineering"),
        StructuredClaim(
            "manager", "reports_to", EntityRef("person", "eid_9b023657", ("herb_eid", "eid_9b023657")), None
        ),
        StructuredClaim("team", "member_of", EntityRef("team", "Platform"), None),
        StructuredClaim("team", "member_of", EntityRef("division", "Core Infra"), None),
        StructuredClaim("location", "located_in", None, "San Francisco"),
        StructuredClaim("employer", "works_at", EntityRef("organization", "Acme", ("domain", "acme.com")), None),
    ]


def test_email_manager_becomes_an_email_identity() -> None:
    (claim,) = structured_claims({"manager": "Hannah.Taylor@Example.com"}, REGISTRY)
    assert claim.object == EntityRef("person", "hannah.taylor@example.com", ("email", "hannah.taylor@example.com"))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"title": None}, "null is not a value"),
        ({"title": ["CEO", "CTO"]}, "cardinality 'one'"),
        ({"title": ""}, "empty value"),
        ({"title": True}, "expected a string or number"),
        ({"title": "x" * (MAX_VALUE_CHARS + 1)}, "longer than"),
        ({"team": []}, "1..50 items"),
        ({"team": {"type": "person", "name": "Bob"}}, "not an object type of 'member_of'"),
        ({"team": "eid_9b023657"}, "person id is not a valid object"),
        ({"manager": {"identity": ["herb_eid"]}}, "identity must be"),
        ({"manager": {"type": "person"}}, "needs a name or an identity"),
        ({"manager": 42}, "expected a name, id or object"),
    ],
)
def test_rejections_carry_a_reason(fields: dict[str, object], reason: str) -> None:
    result = partition_structured_fields(fields, REGISTRY)
    assert result.claims == ()
    (rejected,) = result.rejected
    assert rejected.field == next(iter(fields)) and reason in rejected.reason


def test_structured_claims_raises_naming_every_rejected_field() -> None:
    with pytest.raises(InvalidPayloadError) as caught:
        structured_claims({"title": None, "shoe_size": 44, "team": [], "mood": "happy"}, REGISTRY)
    error = caught.value
    assert isinstance(error, PermanentError)
    assert error.field == "structured_fields.title"
    assert error.context["rejected"] == ["title", "team"]  # unbound fields are not rejections
    assert "title" in str(error) and "team" in str(error) and "shoe_size" not in str(error)


def test_partition_keeps_good_fields_beside_rejections() -> None:
    result = partition_structured_fields({"title": "CEO", "team": [], "shoe_size": 44}, REGISTRY)
    assert [c.predicate for c in result.claims] == ["has_title"]
    assert [r.field for r in result.rejected] == ["team"]
    assert result.ignored == ("shoe_size",)


def test_unbound_fields_are_ignored_never_fatal() -> None:
    result = partition_structured_fields({"priority": "p1", "labels": ["a"], "title": "CTO"}, REGISTRY)
    assert result.rejected == () and result.ignored == ("priority", "labels")
    assert [c.value for c in structured_claims({"priority": "p1", "title": "CTO"}, REGISTRY)] == ["CTO"]
    assert structured_claims({"priority": "p1"}, REGISTRY) == []
