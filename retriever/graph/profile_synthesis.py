"""Optional LLM summary of a grounded Worldbuilder profile through any OpenAI-compatible chat endpoint.

The model sees only the profile's grounded fields (what this viewer may see), never passages or other
viewers' data. Budget: ``daily_token_budget`` tokens per workspace and day in ``spend`` (purpose
``worldbuilder``). On a missing configuration, an exhausted budget or any vendor failure the caller keeps
the deterministic summary and says why (``SynthesisNote``).
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

import asyncpg

from retriever.graph.worldbuilder import profile_fields
from schemas.worldbuilder import Profile, ProfileField, SynthesisNote

log = logging.getLogger("orgmem.worldbuilder.synthesis")
PURPOSE = "worldbuilder"
DEFAULT_DAILY_TOKENS = 200_000
ESTIMATE_TOKENS = 800
SYSTEM = (
    "You write a two-sentence profile summary from the facts given. Use only those facts; do not add"
    " anything. If a fact is missing, leave it out."
)


def _facts_text(profile: Profile) -> str:
    lines = [f"subject: {profile.subject.name} ({profile.kind})"]
    for name in ("title", "team", "manager", "part_of", "definition"):
        f = getattr(profile, name)
        if f is not None:
            lines.append(f"{name}: {f.value}")
    for name in ("reports", "current_projects", "key_collaborators", "members", "owners"):
        items = getattr(profile, name)
        if items:
            lines.append(f"{name}: " + ", ".join(i.value for i in items[:5]))
    return "\n".join(lines)


class ProfileSynthesizer:
    def __init__(
        self, client: Any, *, model: str, provider: str = "openai", daily_token_budget: int = DEFAULT_DAILY_TOKENS
    ) -> None:
        self.client = client
        self.model = model
        self.provider = provider
        self.budget = daily_token_budget

    async def summarize(
        self, conn: asyncpg.Connection, workspace: str, profile: Profile
    ) -> tuple[ProfileField | None, SynthesisNote]:
        """(LLM summary field, note) — ``None`` when the deterministic summary must stay."""
        spent = await conn.fetchval(
            "SELECT COALESCE(sum(tokens), 0) FROM spend WHERE day = current_date AND workspace = $1 AND purpose = $2",
            workspace,
            PURPOSE,
        )
        if int(spent) + ESTIMATE_TOKENS > self.budget:
            return None, SynthesisNote(requested=True, used=False, reason="daily LLM budget reached: deterministic")
        try:
            reply = await self.client.chat.completions.create(
                model=self.model,
                temperature=0,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": _facts_text(profile)}],
            )
            text = (reply.choices[0].message.content or "").strip() if reply.choices else ""
        except Exception as exc:  # any vendor/client failure: keep the deterministic summary, say why
            log.warning("profile synthesis failed: %s", exc)
            return None, SynthesisNote(
                requested=True, used=False, reason=f"LLM synthesis failed ({type(exc).__name__}): deterministic"
            )
        tokens = int(getattr(getattr(reply, "usage", None), "total_tokens", 0) or 0)
        await conn.execute(
            "INSERT INTO spend (day, workspace, provider, model, purpose, calls, items, tokens)"
            " VALUES ($1, $2, $3, $4, $5, 1, 1, $6) ON CONFLICT (day, workspace, provider, model, purpose)"
            " DO UPDATE SET calls = spend.calls + 1, items = spend.items + 1, tokens = spend.tokens + EXCLUDED.tokens",
            date.today(),
            workspace,
            self.provider,
            self.model,
            PURPOSE,
            tokens,
        )
        if not text:
            return None, SynthesisNote(requested=True, used=False, reason="LLM returned no text: deterministic")
        fields = profile_fields(profile)
        times = [f.as_of for f in fields if f.as_of is not None]
        summary = ProfileField(
            value=text,
            evidence=sorted({d for f in fields for d in f.evidence}, key=str),
            as_of=max(times) if times else None,
            source="summary",
        )
        return summary, SynthesisNote(requested=True, used=True, reason=f"LLM summary ({self.model})")
