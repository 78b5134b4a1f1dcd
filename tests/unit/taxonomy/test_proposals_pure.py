"""Pure parts of taxonomy write-back: the signature a receiver verifies, proposal identity, bound slots."""

from __future__ import annotations

import hashlib
import hmac
import uuid

from services.taxonomy import default_registry
from services.taxonomy.proposals import norm, proposal_id, sign


def test_signature_is_hmac_sha256_of_the_exact_body() -> None:
    body = b'{"event": "taxonomy_proposal.created"}'
    expected = "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert sign("k", body) == expected
    assert sign("other", body) != expected
    assert sign("k", body + b" ") != expected


def test_one_proposal_per_subject_slot_and_value() -> None:
    s = uuid.uuid4()
    assert proposal_id("w", s, "title", "VP  of Engineering") == proposal_id("w", s, "title", "vp of engineering")
    assert proposal_id("w", s, "title", "VP") != proposal_id("w", s, "manager", "VP")
    assert norm("  Senior   Engineer ") == "senior engineer"


def test_bound_slots_are_the_knowledge_fields() -> None:
    bound = default_registry().platform_bound()
    assert {k: v.name for k, v in bound.items()} == {"title": "has_title", "manager": "reports_to", "team": "member_of"}
