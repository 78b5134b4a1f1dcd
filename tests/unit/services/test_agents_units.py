"""Pure parts of the agent surfaces: throttle, memory envelopes, directory config, MCP rendering."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from schemas.envelope import ChangeEnvelope
from schemas.memory import RememberRequest
from services.api.mcp import parse_stdio_principal
from services.api.mcp_render import render
from services.directory import static_members
from services.errors import ConfigurationError
from services.memories import Caller, MemoryWriteError, memory_envelope, memory_id
from services.throttle import WriteThrottle

USER = f"user:{uuid.uuid4()}"
TEAM = f"group:{uuid.uuid4()}"


def test_throttle_cap_then_cooldown() -> None:
    now = [0.0]
    t = WriteThrottle(cooldown_s=10, cap=2, clock=lambda: now[0])
    assert t.try_claim(USER, "s") is None
    refusal = t.try_claim(USER, "s")
    assert refusal is not None and refusal.reason == "cooldown" and refusal.retry_after_s == pytest.approx(10)
    now[0] = 10.0
    assert t.try_claim(USER, "s") is None
    now[0] = 100.0
    capped = t.try_claim(USER, "s")
    assert capped is not None and capped.reason == "cap" and capped.retry_after_s is None
    assert t.try_claim(USER, "other") is None  # per session
    assert t.try_claim(f"user:{uuid.uuid4()}", "s") is None  # per principal


def test_memory_envelope_scope_acl_and_stable_id() -> None:
    caller = Caller(USER, frozenset({USER, TEAM}))
    req = RememberRequest.model_validate(
        {"text": "We ship on Tuesdays.", "scope": TEAM, "source": {"agent": "a", "session_id": "s", "event_id": "1"}}
    )
    env = memory_envelope(req, caller)
    assert env.source.system == "agent" and env.acl.principals == [TEAM]
    assert env.document is not None and env.document.title == "note from a" and env.document.text == req.text
    titled = RememberRequest.model_validate({"text": "x", "title": "Ship days", "kind": "decision"})
    assert memory_envelope(titled, caller).document.title == "decision: Ship days"  # type: ignore[union-attr]
    assert env.author is not None and env.author.identities[0].value == USER
    assert env.source.external_id == memory_id("default", USER, req)
    assert memory_envelope(req, caller).source.external_id == env.source.external_id  # retried -> same memory
    other = RememberRequest.model_validate({"text": "We ship on Tuesdays.", "source": {"event_id": "2"}})
    assert memory_envelope(other, caller).source.external_id != env.source.external_id
    assert memory_envelope(other, caller).acl.principals == [USER]
    with pytest.raises(MemoryWriteError) as exc:
        memory_envelope(req, Caller(USER, frozenset({USER})))
    assert exc.value.status == 403 and exc.value.field == "scope"
    with pytest.raises(MemoryWriteError):
        memory_envelope(other, Caller(None, frozenset({TEAM})))


def test_remember_request_validation() -> None:
    for bad, field in (
        ({"text": ""}, "text"),
        ({"text": "x", "scope": "team"}, "scope"),
        ({"text": "x", "kind": "y"}, "kind"),
    ):
        with pytest.raises(ValidationError) as exc:
            RememberRequest.model_validate(bad)
        assert exc.value.errors()[0]["loc"][0] == field


def test_membership_envelope_contract() -> None:
    base = {
        "envelope_id": str(uuid.uuid4()),
        "op": "membership",
        "source": {"system": "hr", "external_id": "x"},
        "event_time": "2024-01-01T00:00:00Z",
    }
    env = ChangeEnvelope.model_validate(base | {"membership": {"group": "group:" + TEAM[6:].upper(), "added": [USER]}})
    assert env.membership is not None and env.membership.group == TEAM and env.document is None
    for membership in (
        None,
        {"group": TEAM},
        {"group": USER, "added": [USER]},
        {"group": TEAM, "added": [USER], "removed": [USER]},
    ):
        with pytest.raises(ValidationError):
            ChangeEnvelope.model_validate(base | ({"membership": membership} if membership else {}))
    with pytest.raises(ValidationError):  # membership only with op membership
        ChangeEnvelope.model_validate(base | {"op": "delete", "membership": {"group": TEAM, "added": [USER]}})


def test_static_members_from_hierarchy() -> None:
    gid = str(uuid.uuid4())
    got = static_members({"groups": {gid: {"level": "team", "members": [USER]}, "x": {"level": "org"}}})
    assert got == {USER: frozenset({f"group:{gid}"})}
    with pytest.raises(ValueError, match=gid):
        static_members({"groups": {gid: {"level": "team", "members": ["bob"]}}})


def test_stdio_principal_required() -> None:
    with pytest.raises(ConfigurationError):
        parse_stdio_principal(None, None)
    with pytest.raises(ConfigurationError):
        parse_stdio_principal(TEAM, None)
    with pytest.raises(ConfigurationError):
        parse_stdio_principal(USER, "user:x")
    assert parse_stdio_principal(USER.upper().replace("USER", "user"), f"{TEAM},") == (USER, (TEAM,))


def test_render_numbers_citations() -> None:
    text = render(
        "retrieve_context",
        {
            "passages": [
                {
                    "title": "T",
                    "text": "alpha beta",
                    "source_system": "slack",
                    "external_id": "m1",
                    "url": "https://x/1",
                    "event_time": "2024-01-01T00:00:00Z",
                },
                {"text": "gamma", "source_system": "jira", "external_id": "J-2", "event_time": "2024-02-01"},
            ],
            "structured_facts": [{"predicate": "owns"}],
        },
    )
    assert text.splitlines()[0] == "[1] T: alpha beta"
    assert "— slack m1 https://x/1, 2024-01-01T00:00:00Z" in text and "[2] gamma" in text and "fact: " in text
    assert render("retrieve_context", {"passages": []}) == "no results visible to you"
