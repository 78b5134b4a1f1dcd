"""Shared corpus for retriever integration tests: an org hierarchy, viewers and documents of every scope."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, produce

ORG, DIV, T1, T2, FOREIGN = (str(uuid.uuid4()) for _ in range(5))
ALICE, BOB, CAROL, DAVE = (str(uuid.uuid4()) for _ in range(4))


def hierarchy_file(tmp: Path) -> Path:
    path = tmp / "org_hierarchy.json"
    path.write_text(
        json.dumps(
            {
                "groups": {
                    ORG: {"level": "org", "name": "org", "parent": None},
                    DIV: {"level": "division", "name": "div", "parent": ORG},
                    T1: {"level": "team", "name": "team-1", "parent": DIV},
                    T2: {"level": "team", "name": "team-2", "parent": DIV},
                }
            }
        )
    )
    return path


@dataclass(frozen=True)
class ViewerSpec:
    name: str
    principal: str | None
    groups: tuple[str, ...] = ()

    def headers(self) -> dict[str, str]:
        h = {"X-Api-Key": "test-key"}
        if self.principal:
            h["X-Principal-Id"] = self.principal
        if self.groups:
            h["X-Principal-Groups"] = ",".join(self.groups)
        return h


VIEWERS = {
    "alice": ViewerSpec("alice", f"user:{ALICE}", (f"group:{T1}",)),
    "bob": ViewerSpec("bob", f"user:{BOB}", (f"group:{T2}",)),
    "carol": ViewerSpec("carol", f"user:{CAROL}", (f"group:{ORG}",)),
    "dave": ViewerSpec("dave", f"user:{DAVE}"),
    "nobody": ViewerSpec("nobody", None),
}


@dataclass(frozen=True)
class DocSpec:
    external_id: str
    word: str  # a token only this document contains
    principals: tuple[str, ...]
    visible_to: frozenset[str] = field(default_factory=frozenset)


DOCS = [
    DocSpec("alice-private", "zorblax", (f"user:{ALICE}",), frozenset({"alice"})),
    DocSpec("team-1", "quintrel", (f"group:{T1}",), frozenset({"alice"})),
    DocSpec("team-2", "vexmorn", (f"group:{T2}",), frozenset({"bob"})),
    DocSpec("division", "plumbrik", (f"group:{DIV}",), frozenset({"alice", "bob"})),
    DocSpec("org-wide", "grindel", (f"group:{ORG}",), frozenset({"alice", "bob", "carol"})),
    DocSpec("foreign", "snarfle", (f"group:{FOREIGN}",), frozenset()),
    DocSpec("dave-private", "wobbert", (f"user:{DAVE}",), frozenset({"dave"})),
]


async def load_corpus(settings: Settings) -> None:
    envs = [
        envelope(
            d.external_id,
            f"The quasar migration notes mention {d.word} as the codename for the rollout.",
            principals=list(d.principals),
            title=f"Notes {d.external_id}",
        )
        for d in DOCS
    ]
    await produce(settings, *envs)
    await wait_embedded(settings, len(DOCS))


async def wait_embedded(settings: Settings, n: int) -> None:
    async def ready() -> bool:
        count = await fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
        return bool(count >= n)

    await eventually(ready, timeout=60)


async def call(client: httpx.AsyncClient, viewer: ViewerSpec, query: str, **body: Any) -> httpx.Response:
    return await client.post("/tools/retrieve_context", json={"query": query, **body}, headers=viewer.headers())
