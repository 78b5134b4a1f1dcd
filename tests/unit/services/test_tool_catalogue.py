"""The tool catalogue's model-facing contract: every property a model sees is described for a model, in
words a model can act on (no implementation words); no identity field or evaluation knob is a tool
argument; a model cannot smuggle one in; diagnostics are left out unless asked for."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from services.api.catalogue import BY_NAME, TOOLS
from services.api.tool_contract import IDENTITY_FIELDS, CatalogueTool, dump, model_schema, parse
from services.errors import InvalidPayloadError
from services.viewer import Viewer

# words that describe how the server works, not what a model can ask for
DENY = (
    "evaluation",
    "override",
    "fuse",
    "fusion",
    "arm",
    "arms",
    "host value",
    "planner",
    "clamped",
    "rrf",
    "rerank",
    "embedding",
    "sql",
    "kafka",
    "postgres",
    "pgvector",
    "event_time",
    "packing",
)
FORBIDDEN_ARGUMENTS = {"workspace", "arms", "principal_id", "groups", "roles", "viewer"}
VIEWER = Viewer.of("user:0b7c58a0-7f0a-4d59-9a3b-0d2f4e1f9a11", ["group:5f1c1a6e-8c5d-4d7e-9a47-0f4c2b9d8e10"])


def properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted name, property schema) of every property, nested models ($defs) included."""
    yield from ((name, p) for name, p in schema.get("properties", {}).items())
    for model, sub in schema.get("$defs", {}).items():
        yield from ((f"{model}.{name}", p) for name, p in sub.get("properties", {}).items())


def ids(tool: CatalogueTool[Any, Any]) -> str:
    return tool.name


def test_the_catalogue_is_the_tool_list() -> None:
    assert len(TOOLS) >= 10 and len(BY_NAME) == len(TOOLS), "tool names are unique"
    assert all(re.fullmatch(r"[a-z][a-z_]{2,63}", t.name) for t in TOOLS)


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_every_model_facing_property_has_a_description_without_implementation_words(
    tool: CatalogueTool[Any, Any],
) -> None:
    schema = model_schema(tool)
    assert len(tool.description) >= 40
    missing = [name for name, p in properties(schema) if not str(p.get("description") or "").strip()]
    assert not missing, f"{tool.name}: properties without a description: {missing}"
    for name, p in properties(schema):
        bad = implementation_words(str(p["description"]))
        assert not bad, f"{tool.name}.{name}: implementation words {bad} in {p['description']!r}"


def implementation_words(text: str) -> list[str]:
    words, low = set(re.findall(r"[a-z_]+", text.lower())), text.lower()
    return [w for w in DENY if (w in low if " " in w else w in words)]


def test_the_deny_list_flags_the_old_descriptions() -> None:
    assert implementation_words("evaluation override: which arms to fuse") == ["evaluation", "override", "fuse", "arms"]
    assert implementation_words("host value wins over the planner's grain") == ["host value", "planner"]
    assert implementation_words("packing budget, clamped to 1..100000") == ["clamped", "packing"]
    assert implementation_words("how many passages to return at most (1 to 50)") == []


@pytest.mark.parametrize("tool", TOOLS, ids=ids)
def test_no_identity_field_or_evaluation_knob_is_a_tool_argument(tool: CatalogueTool[Any, Any]) -> None:
    seen = {name.split(".")[-1] for name, _ in properties(model_schema(tool))}
    assert not (seen & FORBIDDEN_ARGUMENTS), seen & FORBIDDEN_ARGUMENTS
    assert tool.hidden >= (IDENTITY_FIELDS & set(tool.request.model_fields))


@pytest.mark.parametrize("tool", [t for t in TOOLS if t.hidden], ids=ids)
def test_a_model_cannot_choose_a_hidden_field(tool: CatalogueTool[Any, Any]) -> None:
    for name in tool.hidden:
        with pytest.raises(InvalidPayloadError) as err:
            parse(tool, {name: "some-other-workspace" if name == "workspace" else "lexical"}, VIEWER)
        assert err.value.field == name and err.value.status == 422


def test_the_workspace_is_the_servers_and_a_default_sent_by_a_client_is_harmless() -> None:
    tool = BY_NAME["retrieve_context"]
    req, diagnostics = parse(tool, {"query": "who owns billing?", "workspace": "default", "arms": "full"}, VIEWER)
    assert req.workspace == "default" and req.arms == "full" and diagnostics is False
    with pytest.raises(InvalidPayloadError) as err:
        parse(tool, {"query": "q", "workspace": "eval-123"}, VIEWER)
    assert err.value.field == "workspace"


def test_validation_errors_name_the_field_on_the_model_facing_path() -> None:
    with pytest.raises(InvalidPayloadError) as err:
        parse(BY_NAME["retrieve_context"], {"query": "q", "bogus": 1}, VIEWER)
    assert err.value.field == "bogus" and err.value.status == 422
    with pytest.raises(InvalidPayloadError) as err:
        parse(BY_NAME["query_facts"], {}, VIEWER)
    assert err.value.field == "subjects"
    with pytest.raises(InvalidPayloadError) as err:
        parse(BY_NAME["retrieve_context"], {"query": "q", "diagnostics": "yes"}, VIEWER)
    assert err.value.field == "diagnostics"


def test_diagnostics_only_when_asked() -> None:
    from schemas.tools import RetrieveContextResponse

    tool = BY_NAME["retrieve_context"]
    resp = RetrieveContextResponse(passages=[], diagnostics={"fusion": {"big": "x" * 1000}})
    assert "diagnostics" not in dump(tool, resp, diagnostics=False)
    assert dump(tool, resp, diagnostics=True)["diagnostics"] == {"fusion": {"big": "x" * 1000}}
    _, asked = parse(tool, {"query": "q", "diagnostics": True}, VIEWER)
    assert asked is True
    assert "diagnostics" in model_schema(tool)["properties"]
    assert "diagnostics" not in model_schema(BY_NAME["query_facts"])["properties"]


def test_fit_drops_the_lowest_ranked_items_until_the_answer_fits() -> None:
    from services.api.tool_contract import fit

    passage = {"external_id": "x", "text": "y" * 300}
    data = {"passages": [passage | {"external_id": str(i)} for i in range(10)], "paths": [{"p": "z" * 200}] * 3}
    out = fit(data, 1000)
    assert out["paths"] == [] and 1 <= len(out["passages"]) < 10
    assert [p["external_id"] for p in out["passages"]] == [str(i) for i in range(len(out["passages"]))]
    assert len(json.dumps(out, separators=(",", ":"))) <= 1000
    assert len(fit(data, 10)["passages"]) == 1  # never nothing: the best passage stays
    assert fit(data, 10**6) == data
