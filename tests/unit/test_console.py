"""The operator console's pure parts: templates escape what they show, the sparkline / graph / timeline
geometry, "visible since" from the permission history. (The pages in a browser: tests/integration.)"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from services.api.console.ops import _pretty, sparkline
from services.api.console.render import CSP, env, graph_layout, timeline
from services.api.console.whynot import visible_since

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_dead_letter_renders_escaped_and_its_redrive_body_stays_json() -> None:
    item = {
        "stage": "ingest",
        "position": "t:0:1",
        "key": HOSTILE,
        "error_class": HOSTILE,
        "error_field": HOSTILE,
        "message": HOSTILE,
        "original": "t:0:0",
        "failed_at": None,
        "stored_in": "topic",
        "payload": HOSTILE,
        "payload_truncated": False,
    }
    page = {"stage": "ingest", "items": [item], "classes": {HOSTILE: 1}, "total": 1, "scanned_all": True}
    html = env.get_template("fragments/dead_letters.html").render(p=page, error_class=HOSTILE, redriven={})
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # the class name inside the data-body attribute is JSON with <, >, ' escaped: it cannot end the attribute
    assert 'data-body=\'{"error_class": "\\u003cscript\\u003e' in html


def test_pages_carry_a_csp_without_inline_script() -> None:
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    html = env.get_template("pipeline.html").render(
        page="pipeline", pages={"pipeline": "Pipeline"}, stages=["ingest"], replayable=["ingest"], title="Pipeline"
    )
    assert '<script src="/console/static/console.js" defer></script>' in html
    assert html.count("<script") == 1 and " style=" not in html and "onclick" not in html


def test_payloads_are_pretty_printed_and_cut() -> None:
    text, cut = _pretty(b'{"b": 1, "a": [1, 2]}')
    assert text.startswith('{\n  "a": [') and not cut
    text, cut = _pretty(b"x" * 5000)
    assert len(text) == 4000 and cut
    assert _pretty(b"\xff{not json")[0].startswith("\ufffd")


def test_sparkline_scales_to_the_peak() -> None:
    history = [{"at": T0, "lag": {"ingest": v}} for v in (0, 10, 5)]
    line = sparkline(history, "ingest", width=100, height=20)
    assert line["max"] == 10 and line["n"] == 3
    assert line["points"].split() == ["0.0,18.0", "50.0,2.0", "100.0,10.0"]
    assert sparkline([], "ingest")["points"] == ""
    assert sparkline(history, "embed")["max"] == 0  # a stage missing from the samples is flat


def test_visible_since_is_the_start_of_the_uninterrupted_grant() -> None:
    g = f"group:{uuid.uuid4()}"
    day = timedelta(days=1)
    history: list[dict[str, Any]] = [
        {"valid_from": T0, "valid_to": T0 + day, "principals": [g], "deleted": False},
        {"valid_from": T0 + day, "valid_to": T0 + 2 * day, "principals": [], "deleted": False},
        {"valid_from": T0 + 2 * day, "valid_to": T0 + 3 * day, "principals": [g], "deleted": False},
        {"valid_from": T0 + 3 * day, "valid_to": None, "principals": [g, "group:x"], "deleted": False},
    ]
    assert visible_since(history, {g}, T0 + 10 * day) == T0 + 2 * day  # revoked on day 1, granted again on day 2
    assert visible_since(history, {g}, T0 + timedelta(hours=1)) == T0
    assert visible_since(history, {g}, T0 + day + timedelta(hours=1)) is None
    assert visible_since(history, {"group:other"}, T0 + 10 * day) is None


def _brief(name: str) -> dict[str, str]:
    return {"type": "person", "id": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "name": name}


def test_graph_layout_draws_labelled_edges_between_entities_and_values() -> None:
    facts = [
        {"subject": _brief("Priya"), "predicate": "reports_to", "object": _brief("Dana")},
        {"subject": _brief("Priya"), "predicate": "has_title", "value": "Staff Engineer"},
    ]
    paths = [{"steps": [{"source": _brief("Dana"), "target": _brief("Acme"), "predicate": "works_on"}]}]
    g = graph_layout(facts, paths)
    assert sorted(n["name"] for n in g["nodes"]) == ["Acme", "Dana", "Priya", "Staff Engineer"]
    assert sorted(e["label"] for e in g["edges"]) == ["has_title", "reports_to", "works_on"]
    assert graph_layout([], []) == {"size": 420, "nodes": [], "edges": []}


def test_timeline_runs_open_facts_to_now() -> None:
    def fact(value: str, start: datetime, end: datetime | None) -> SimpleNamespace:
        return SimpleNamespace(
            subject=SimpleNamespace(name="Priya"), predicate="has_title", object=None, value=value,
            valid_from=start, valid_to=end,
        )  # fmt: skip

    old = fact("Staff", T0, T0 + timedelta(days=30))
    new = fact("Principal", T0 + timedelta(days=30), None)
    tl = timeline([new, old], width=220)
    assert [r["label"] for r in tl["rows"]] == ["Priya has_title Staff", "Priya has_title Principal"]
    first, second = tl["rows"]
    assert first["x"] == 10.0 and second["x"] > first["x"] and second["x"] + second["w"] <= 210.5
    assert timeline([])["rows"] == []
