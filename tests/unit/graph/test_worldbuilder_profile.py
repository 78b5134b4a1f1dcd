"""Worldbuilder pure parts: summary from grounded fields, and the optional LLM summary's budget and
fallback (fake chat client and fake connection; the real path is covered by integration tests)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from retriever.graph.profile_synthesis import ProfileSynthesizer
from retriever.graph.worldbuilder import summarize
from schemas.graph import EntityBrief
from schemas.worldbuilder import Profile, ProfileField

D1, D2 = uuid.uuid4(), uuid.uuid4()
T1, T2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)


def _profile(**kw: Any) -> Profile:
    subject = EntityBrief(type="person", id=uuid.uuid4(), name="Priya Shah")
    return Profile(subject=subject, kind="person", **kw)


def test_summary_rests_only_on_the_fields_it_names() -> None:
    p = _profile(
        title=ProfileField(value="VP of Engineering", evidence=[D1], as_of=T1),
        manager=ProfileField(value="Dana Lee", evidence=[D2], as_of=T2),
    )
    s = summarize(p)
    assert s is not None
    assert s.value == "Priya Shah is VP of Engineering, reporting to Dana Lee."
    assert set(s.evidence) == {D1, D2} and s.as_of == T2
    without = summarize(_profile(manager=ProfileField(value="Dana Lee", evidence=[D2], as_of=T2)))
    assert without is not None and without.evidence == [D2] and "VP" not in without.value
    assert summarize(_profile()) is None


class FakeConn:
    def __init__(self, spent: int) -> None:
        self.spent = spent
        self.executed: list[tuple[Any, ...]] = []

    async def fetchval(self, sql: str, *args: Any) -> int:
        return self.spent

    async def execute(self, sql: str, *args: Any) -> str:
        self.executed.append(args)
        return "INSERT 0 1"


class FakeChat:
    def __init__(self, reply: str | None = None, error: Exception | None = None) -> None:
        self.reply, self.error, self.calls = reply, error, 0
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, **kw: Any) -> Any:
        self.calls += 1
        if self.error:
            raise self.error
        msg = SimpleNamespace(content=self.reply)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)], usage=SimpleNamespace(total_tokens=120))


async def test_llm_summary_used_and_spend_recorded() -> None:
    client, conn = FakeChat("Priya leads engineering."), FakeConn(0)
    p = _profile(title=ProfileField(value="VP of Engineering", evidence=[D1], as_of=T1))
    summary, note = await ProfileSynthesizer(client, model="m").summarize(conn, "default", p)
    assert summary is not None and summary.value == "Priya leads engineering." and summary.evidence == [D1]
    assert note.used and client.calls == 1
    assert conn.executed and conn.executed[0][-1] == 120


async def test_llm_failure_and_budget_fall_back_and_say_so() -> None:
    p = _profile()
    failing = FakeChat(error=RuntimeError("vendor down"))
    summary, note = await ProfileSynthesizer(failing, model="m").summarize(FakeConn(0), "default", p)
    assert summary is None and not note.used and "RuntimeError" in note.reason
    broke = FakeChat("never")
    summary, note = await ProfileSynthesizer(broke, model="m", daily_token_budget=1000).summarize(
        FakeConn(900),
        "default",
        p,
    )
    assert summary is None and "budget" in note.reason and broke.calls == 0
