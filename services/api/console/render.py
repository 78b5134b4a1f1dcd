"""Rendering of the console: the Jinja2 environment (autoescaped), page and fragment responses with their security
headers (a Content-Security-Policy without inline scripts or styles), and the pure layouts of the graph and
timeline views."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from fastapi import Response
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

PAGES = {
    "pipeline": "Pipeline",
    "dead-letters": "Dead letters",
    "replay": "Replay / rebuild",
    "playground": "Search playground",
    "governance": "Governance",
    "graph": "Graph cards",
}


CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


STATIC = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}


env = Environment(
    loader=PackageLoader("services.api.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _html(template: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(env.get_template(template).render(**context), headers=SECURITY_HEADERS)


# an HTML fragment on success; errors keep the project's JSON shape (a response_class of HTMLResponse would
# declare them text/html in the OpenAPI document)
HTML: dict[str, Any] = {
    "response_class": Response,
    "responses": {200: {"description": "An HTML fragment", "content": {"text/html": {"schema": {"type": "string"}}}}},
}


def _fragment(template: str, **context: Any) -> HTMLResponse:
    return _html(f"fragments/{template}", **context)


def graph_layout(facts: list[dict[str, Any]], paths: list[dict[str, Any]], size: int = 420) -> dict[str, Any]:
    """Nodes on a circle and labelled edges of the facts and paths (relationships between two entities)."""
    names: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []

    def node(e: Any) -> str | None:
        if isinstance(e, dict) and e.get("id"):
            names.setdefault(str(e["id"]), str(e.get("name") or e["id"]))
            return str(e["id"])
        return None

    for f in facts:
        s, o = node(f.get("subject")), node(f.get("object"))
        if s and o:
            edges.append((s, o, str(f.get("predicate", ""))))
        elif s and f.get("value") is not None:
            vid = f"value:{s}:{f.get('predicate')}:{f.get('value')}"
            names[vid] = str(f.get("value"))[:40]
            edges.append((s, vid, str(f.get("predicate", ""))))
    for p in paths:
        for step in p.get("steps") or []:
            s, t = node(step.get("source")), node(step.get("target"))
            if s and t:
                edges.append((s, t, str(step.get("predicate", ""))))
    ids = list(names)[:40]
    c, r = size / 2, size / 2 - 60
    pos = {
        n: (round(c + r * math.cos(2 * math.pi * i / max(1, len(ids))), 1),
            round(c + r * math.sin(2 * math.pi * i / max(1, len(ids))), 1))
        for i, n in enumerate(ids)
    }  # fmt: skip
    drawn = [
        {"x1": pos[a][0], "y1": pos[a][1], "x2": pos[b][0], "y2": pos[b][1], "label": label,
         "lx": round((pos[a][0] + pos[b][0]) / 2, 1), "ly": round((pos[a][1] + pos[b][1]) / 2, 1)}
        for a, b, label in dict.fromkeys(edges) if a in pos and b in pos
    ]  # fmt: skip
    return {
        "size": size,
        "nodes": [
            {"x": pos[n][0], "y": pos[n][1], "name": names[n][:40], "anchor": "end" if pos[n][0] > c + 1 else "start"}
            for n in ids
        ],
        "edges": drawn,
    }


def timeline(facts: list[Any], width: int = 640) -> dict[str, Any]:
    """Facts as bars from valid_from to valid_to (open-ended facts run to now), one row each."""
    now = datetime.now(UTC)
    if not facts:
        return {"rows": [], "width": width, "height": 0, "start": None, "end": None}
    start = min(f.valid_from for f in facts)
    end = max([now, *[f.valid_to for f in facts if f.valid_to]])
    span = max(1.0, (end - start).total_seconds())
    rows = []
    for i, f in enumerate(sorted(facts, key=lambda f: f.valid_from)):
        x1 = (f.valid_from - start).total_seconds() / span * (width - 20) + 10
        x2 = ((f.valid_to or now) - start).total_seconds() / span * (width - 20) + 10
        label = f"{f.subject.name} {f.predicate} {f.object.name if f.object else f.value}"
        rows.append({"y": 10 + i * 26, "x": round(x1, 1), "w": round(max(3.0, x2 - x1), 1), "label": label, "f": f})
    return {"rows": rows, "width": width, "height": 20 + len(rows) * 26, "start": start, "end": end}
