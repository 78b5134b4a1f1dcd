"""The ACL conformance corpus and its crafted outside viewers (``test_acl_conformance.py``).

Every secret is a unique random token placed in ONE place a secret can live — text, title, author,
participants, structured fields, identities, a thread neighbour, a memory, a procedure, facts, a profile
field, a proposal — in a document (or write) only alice / team 1 may see. Public controls live under the
org group, which every sibling viewer (team 2, the division) holds. A leak is any outside viewer's answer
that contains any secret token (or a private document / chunk id) it did not send itself.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from schemas.envelope import ChangeEnvelope
from services.settings import Settings
from tests.integration.doors import Who, rpc_viewer
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, produce
from tests.integration.retriever_fixtures import ALICE, BOB, DIV, ORG, T1, T2
from tests.reliability.test_acl_probe import outsiders, swap_digit

KEY = {"X-Api-Key": "test-key"}
T1G, T2G, ORGG, DIVG = f"group:{T1}", f"group:{T2}", f"group:{ORG}", f"group:{DIV}"
REMOVED, FUTURE, SIBLING = (str(uuid.uuid4()) for _ in range(3))
PU = str(uuid.uuid4())  # the platform-user id only a private HR record carries
PURGE_PU = str(uuid.uuid4())
INSIDER = Who(
    "alice",
    KEY | {"X-Principal-Id": f"user:{ALICE}", "X-Principal-Groups": T1G},
    {"principal_id": f"user:{ALICE}", "groups": [T1G]},
)
TOKENS = {  # bearer token -> principal, for the MCP door
    "tok-alice": {"principal_id": f"user:{ALICE}", "groups": [T1G]},
    "tok-sibling": {"principal_id": f"user:{SIBLING}", "groups": [T2G]},
    "tok-removed": {"principal_id": f"user:{REMOVED}"},  # groups from the directory: removed from team 1
    "tok-future": {"principal_id": f"user:{FUTURE}"},  # joins team 1 tomorrow
    "tok-admin-role": {"principal_id": f"user:{uuid.uuid4()}", "roles": ["admin"]},
}


def word(rng: random.Random, n: int = 9) -> str:
    """A letters-only token (names must look like names to the extractor)."""
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


def name(rng: random.Random) -> str:
    return f"{word(rng, 7).capitalize()} {word(rng, 8).capitalize()}"


def hierarchy(tmp: Path) -> Path:
    path = tmp / "org_hierarchy.json"
    path.write_text(
        json.dumps(
            {
                "groups": {
                    ORG: {"level": "org", "name": "org", "parent": None},
                    DIV: {"level": "division", "name": "div", "parent": ORG},
                    T1: {"level": "team", "name": "team-1", "parent": DIV, "members": [f"user:{ALICE}"]},
                    T2: {"level": "team", "name": "team-2", "parent": DIV, "members": [f"user:{BOB}"]},
                }
            }
        )
    )
    return path


def tokens_file(tmp: Path) -> Path:
    path = tmp / "mcp_tokens.json"
    path.write_text(json.dumps(TOKENS))
    return path


@dataclass
class Corpus:
    secrets: dict[str, str]  # location -> token
    names: dict[str, str]  # location -> a secret person name (two tokens)
    ids: dict[str, list[str]] = field(default_factory=dict)  # kind -> ids for path parameters and subjects
    private_ids: list[str] = field(default_factory=list)  # private document and chunk ids (secrets too)
    deleted: str = ""  # the token of the deleted thread message
    purged: dict[str, str] = field(default_factory=dict)

    def all_secrets(self) -> dict[str, str]:
        """token -> location, every secret an outsider must never receive."""
        out = {tok: loc for loc, tok in self.secrets.items()}
        for loc, full in self.names.items():
            for part in full.split():
                out[part.lower()] = loc
        out |= {i: "private-id" for i in self.private_ids}
        return out


def membership(group: str, *, added: list[str] = (), removed: list[str] = (), at: datetime) -> ChangeEnvelope:  # type: ignore[assignment]
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": at.isoformat(),
            "membership": {"group": group, "added": list(added), "removed": list(removed)},
        }
    )


def in_thread(env: ChangeEnvelope, thread: str) -> ChangeEnvelope:
    assert env.document is not None
    return env.model_copy(update={"document": env.document.model_copy(update={"thread_external_id": thread})})


async def build(settings: Settings, http: Any, seed: int = 20) -> Corpus:
    """Produce the corpus through the real doors (envelopes on Kafka, memories and procedures over HTTP) and
    wait until every stage has applied it."""
    rng = random.Random(uuid.uuid4().int)
    sec = {
        loc: word(rng)
        for loc in (
            "text",
            "title",
            "author_email",
            "participant_email",
            "structured_field",
            "identity_alias",
            "thread_neighbour",
            "memory",
            "procedure",
            "proposal",
            "private_proposal",
            "narrowed",
            "deleted",
            "purged_field",
            "purged_alias",
        )
    }
    names = {loc: name(rng) for loc in ("author_name", "participant_name", "fact_subject", "fact_object")}
    c = Corpus(secrets=sec, names=names, deleted=sec["deleted"])
    c.purged = {"field": sec["purged_field"], "alias": sec["purged_alias"]}
    now = datetime.now(UTC)
    priya: dict[str, Any] = {"author_email": "priya@corp.example", "author_name": "Priya Shah"}
    envs = [
        # public controls (the org: every sibling viewer sees them)
        envelope("pub-1", "The quasar migration notes are public for the whole org.", principals=[ORGG], **priya),
        envelope("pub-2", "Priya Shah is the VP of Engineering.", principals=[ORGG], event_time=later(10), **priya),
        # secrets, one place each
        envelope("s-text", f"The quasar migration codename is {sec['text']}.", principals=[T1G]),
        envelope("s-title", "Quasar migration notes, second draft.", principals=[T1G], title=f"Plan {sec['title']}"),
        envelope(
            "s-author",
            "Quasar migration: I will take the rollout.",
            principals=[T1G],
            author_email=f"{sec['author_email']}@corp.example",
            author_name=names["author_name"],
        ),
        envelope(
            "s-participants",
            "Quasar migration sync.",
            principals=[T1G],
            participants=[
                {"email": f"{sec['participant_email']}@corp.example", "display_name": names["participant_name"]}
            ],
        ),
        envelope(
            "s-hr",  # the host's private HR record of a PUBLIC person: title and identities are private
            "directory record",
            principals=[T1G],
            structured_fields={"title": f"Principal {sec['structured_field'].capitalize()}"},
            identities=[
                {"namespace": "platform_user", "value": PU, "verified": True},
                {"namespace": "slack", "value": f"U{sec['identity_alias']}", "verified": True},
            ],
            **priya,
        ),
        envelope(
            "s-facts",
            f"{names['fact_subject']} reports to {names['fact_object']}.",
            principals=[T1G],
            event_time=later(5),
        ),
        envelope("s-narrowed", f"The quasar budget line is {sec['narrowed']}.", principals=[ORGG]),
        # a thread: a private message followed by a public one (the follower's context must not carry it)
        in_thread(envelope("th-1", f"Quasar secret step {sec['thread_neighbour']}.", principals=[T1G]), "th"),
        in_thread(envelope("th-2", "Which step was that?", principals=[ORGG], event_time=later(1)), "th"),
        # a public thread whose first message is deleted later: its text must leave the follower's index
        in_thread(envelope("del-1", f"Quasar note {sec['deleted']} for everyone.", principals=[ORGG]), "dt"),
        in_thread(envelope("del-2", "Noted, thanks.", principals=[ORGG], event_time=later(1)), "dt"),
        # a private record that retention purges: its values must leave facts and aliases
        envelope(
            "purge-hr",
            "directory record",
            principals=[T1G],
            system="hrpurge",
            structured_fields={"title": f"Director {sec['purged_field'].capitalize()}"},
            identities=[
                {"namespace": "platform_user", "value": PURGE_PU, "verified": True},
                {"namespace": "slack", "value": f"U{sec['purged_alias']}", "verified": True},
            ],
            author_email="omar@corp.example",
            author_name="Omar Field",
        ),
        envelope("purge-pub", "Omar Field runs the quasar ops desk.", principals=[ORGG], author_name="Omar Field"),
        # the directory: REMOVED left team 1 a month ago, FUTURE joins it tomorrow
        membership(T1G, added=[f"user:{REMOVED}"], at=now - timedelta(days=400)),
        membership(T1G, removed=[f"user:{REMOVED}"], at=now - timedelta(days=30)),
        membership(T1G, added=[f"user:{FUTURE}"], at=now + timedelta(hours=20)),
    ]
    await produce(settings, *envs)

    # a memory and a procedure through their HTTP doors, as alice
    mem = await http.post(
        "/v1/memories",
        json={"text": f"Alice's note: the quasar vault word is {sec['memory']}.", "source": {"session_id": "acl"}},
        headers=dict(INSIDER.headers),
    )
    assert mem.status_code == 202, mem.text
    # the forget probes' target: an admin viewer may forget any memory (by design), so not the secret one
    target = await http.post(
        "/v1/memories",
        json={"text": "Alice's scratch note.", "source": {"session_id": "acl", "event_id": "scratch"}},
        headers=dict(INSIDER.headers),
    )
    assert target.status_code == 202, target.text
    proc = await http.post(
        "/v1/procedural-memories",
        json={
            "name": f"Quasar rollout {sec['procedure']}",
            "when_to_use": "when rolling out the quasar migration",
            "steps": [f"open the {sec['procedure']} console", "run the migration"],
            "scope": [T1G],
        },
        headers=dict(INSIDER.headers),
    )
    assert proc.status_code == 202, proc.text

    async def settled() -> bool:
        return bool(
            await fetchval(
                settings,
                "SELECT (SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL) >= 14"
                " AND (SELECT count(*) FROM facts WHERE predicate = 'reports_to') >= 1"
                " AND (SELECT count(*) FROM taxonomy_proposals) >= 1"
                " AND (SELECT count(*) FROM person_aliases WHERE namespace = 'platform_user') >= 2"
                " AND (SELECT count(*) FROM procedure_versions) >= 1",
            )
        )

    await eventually(settled, timeout=90)
    proposals = await _proposals(settings, http, sec)
    # narrowing: the budget line moves from the org to team 1
    await produce(settings, envelope("s-narrowed", op="acl", principals=[T1G], acl_event_time=later(30)))
    await eventually(
        lambda: fetchval(settings, "SELECT $1 = ANY(principals) FROM documents WHERE external_id = 's-narrowed'", T1G)
    )
    # the deleted thread message
    await produce(settings, envelope("del-1", op="delete", principals=[ORGG], event_time=later(40)))
    await eventually(
        lambda: fetchval(settings, "SELECT deleted_at IS NOT NULL FROM documents WHERE external_id = 'del-1'")
    )

    private = await fetch(
        settings,
        "SELECT d.id AS doc, c.id AS chunk FROM documents d JOIN chunks c ON c.document_id = d.id"
        " WHERE NOT (d.principals && $1::text[])",
        [ORGG],
    )
    c.private_ids = sorted({str(r["doc"]) for r in private} | {str(r["chunk"]) for r in private})
    ents = await fetch(settings, "SELECT id FROM entities")
    people = await fetch(settings, "SELECT COALESCE(merged_into, id) AS id FROM people")
    c.ids = {
        "entity": sorted({str(r["id"]) for r in ents} | {str(r["id"]) for r in people}),
        "platform_user": [PU, PURGE_PU],
        "procedure": [proc.json()["procedure_id"]],
        "memory": [target.json()["memory_id"]],
        "proposal": proposals,
    }
    return c


async def _proposals(settings: Settings, http: Any, sec: dict[str, str]) -> list[str]:
    """Two pending procedure proposals by alice: one for team 1 citing a team-1 document, one private to her."""
    doc = await fetchval(settings, "SELECT id FROM documents WHERE external_id = 's-text'")
    ids = []
    for title, scope, sources in (
        (f"Quasar cutover {sec['proposal']}", [T1G], [str(doc)]),
        (f"Quasar private cutover {sec['private_proposal']}", [], []),
    ):
        r = await http.post(
            "/v1/procedure-proposals",
            json={"title": title, "steps": ["freeze the quasar deploys"], "scope": scope, "source_ids": sources},
            headers=dict(INSIDER.headers),
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["proposal_id"])
    return ids


def viewers() -> list[Who]:
    """≥ 40 crafted outside viewers: the probe's spoofed / malformed / lookalike / role / header tricks,
    siblings, upper-cased and lookalike groups, removed and future members, MCP bearer tokens."""
    out: list[Who] = []
    for label, headers in outsiders():
        forged_key = headers.get("X-Api-Key") != "test-key"
        # the Kafka door has no API key (the topic ACL authenticates the service): a key trick has no RPC form
        out.append(Who(label, headers, None if forged_key else rpc_viewer(headers)))
    extra = {
        "sibling-user": KEY | {"X-Principal-Id": f"user:{SIBLING}", "X-Principal-Groups": T2G},
        "org-member": KEY | {"X-Principal-Id": f"user:{uuid.uuid4()}", "X-Principal-Groups": ORGG},
        "upper-sibling-group": KEY | {"X-Principal-Groups": T2G.upper()},
        "upper-random-group": KEY | {"X-Principal-Groups": f"GROUP:{str(uuid.uuid4()).upper()}"},
        "upper-lookalike-team": KEY | {"X-Principal-Groups": f"GROUP:{swap_digit(T1).upper()}"},
        "removed-member": KEY | {"X-Principal-Id": f"user:{REMOVED}"},
        "future-member": KEY | {"X-Principal-Id": f"user:{FUTURE}"},
        "removed-member-with-sibling": KEY | {"X-Principal-Id": f"user:{REMOVED}", "X-Principal-Groups": T2G},
        "bob-directory": KEY | {"X-Principal-Id": f"user:{BOB}"},
        "admin-role-sibling": KEY | {"X-Principal-Groups": T2G, "X-Principal-Roles": "admin"},
        "roles-list-trick": KEY | {"X-Principal-Groups": T2G, "X-Principal-Roles": "viewer,admin,owner,root"},
    }
    out += [Who(k, v, rpc_viewer(v)) for k, v in extra.items()]
    bearer = {
        "bearer-sibling": "tok-sibling",
        "bearer-removed": "tok-removed",
        "bearer-future": "tok-future",
        "bearer-admin-role": "tok-admin-role",
        "bearer-unknown": "tok-nope",
        "bearer-alice-prefix": "tok-alic",
        "bearer-alice-upper": "TOK-ALICE",
    }
    out += [Who(k, {"Authorization": f"Bearer {t}"}, None) for k, t in bearer.items()]
    return out


QUICK = (  # one of each kind: sibling, lookalike, role trick, removed / future member, upper-cased, bearer
    "sibling-user",
    "swapped-digit-team",
    "admin-role-sibling",
    "removed-member",
    "future-member",
    "upper-sibling-group",
    "bearer-sibling",
)
