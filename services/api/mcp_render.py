"""What a model reads from an MCP tool call: a compact text rendering of a tool's answer with numbered citations
(source system, external id, url, event time) beside its structured content (``services/api/mcp.py``)."""

from __future__ import annotations

import json
from typing import Any

SNIPPET_CHARS = 400
JSON_RENDERED = frozenset({"diff_facts", "worldbuilder_kb"})  # the others have their own rendering above


def _cite(n: int, p: dict[str, Any]) -> str:
    where = f"{p.get('source_system')} {p.get('external_id')}"
    if p.get("url"):
        where += f" {p['url']}"
    title = f"{p['title']}: " if p.get("title") else ""
    text = " ".join(str(p.get("text") or p.get("snippet") or "").split())
    if len(text) > SNIPPET_CHARS:
        text = text[: SNIPPET_CHARS - 1] + "…"
    return f"[{n}] {title}{text}\n    — {where}, {p.get('event_time')}"


def render(tool: str, data: dict[str, Any]) -> str:
    """A compact rendering with numbered citations (source system, external id, url, event time)."""
    lines: list[str] = []
    passages = data.get("passages") or []
    for i, p in enumerate(passages, 1):
        lines.append(_cite(i, p))
    for key in ("structured_facts", "facts", "search_facts"):
        for f in data.get(key) or []:
            lines.append("fact: " + json.dumps(f, default=str, separators=(",", ":"))[:600])
    for p in data.get("paths") or []:
        lines.append("path: " + json.dumps(p, default=str, separators=(",", ":"))[:600])
    if tool in ("remember", "forget"):
        lines.append(json.dumps({k: v for k, v in data.items() if k != "key"}, default=str))
    if tool in JSON_RENDERED:
        lines.append(json.dumps(data, default=str, separators=(",", ":"))[:4000])
    if tool == "worldbuilder_lookup":
        lines += _render_profile(data.get("profile") or {})
    for hit in data.get("results") or []:
        if tool == "search_procedural_memory":
            proc = hit.get("procedure") or {}
            steps = "; ".join(f"{i}. {st}" for i, st in enumerate(proc.get("steps") or [], 1))
            lines.append(
                f"procedure {proc.get('name')} (v{proc.get('version')}, id {proc.get('procedure_id')}): {steps}"
            )
    if data.get("answer"):
        lines.insert(0, f"answer: {data['answer']}")
    if not lines:
        lines.append("no results visible to you")
    return "\n".join(lines)


def _render_profile(profile: dict[str, Any]) -> list[str]:
    """A Worldbuilder profile as lines of ``field: value [evidence document ids]``."""
    lines: list[str] = []
    subject = profile.get("subject") or {}
    if subject:
        lines.append(f"profile of {subject.get('name')} ({profile.get('kind')})")
    for name, value in profile.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict) and "value" in item:
                evidence = ",".join(str(e) for e in item.get("evidence") or [])
                lines.append(f"{name}: {item['value']}" + (f" [evidence {evidence}]" if evidence else ""))
    return lines
