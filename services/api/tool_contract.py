"""The contract of one catalogue tool (``services/api/catalogue.py`` lists the tools): the ``CatalogueTool`` entry,
the MODEL-facing schema (no identity field, no operator knob, a description on every property), how a model-facing
call is parsed (hidden fields refused unless they carry the server's own value) and how its answer is dumped
(diagnostics only when asked, within the request's byte budget)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from services.errors import InvalidPayloadError
from services.runtime import Runtime
from services.viewer import Viewer

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)

IDENTITY_FIELDS = frozenset({"workspace"})
"""Request fields that come from the credential or gateway, never from a model."""
DIAGNOSTICS = "diagnostics"
DEFAULT_WORKSPACE = "default"
BYTES_PER_TOKEN = 4
ANSWER_OVERHEAD = 1_200  # bytes: the answer's fixed fields and one passage's citation (ids, source, time, scores)
RANKED_LISTS = ("paths", "fact_diffs", "search_facts", "structured_facts", "passages")  # dropped first .. last
DIAGNOSTICS_NOTE = (
    "true only to debug retrieval itself: adds the ranking and timing internals (several KB) to the answer"
)


def workspace_for(credential_workspace: str | None) -> str:
    """The workspace a model-facing call runs in: the credential's (a key bound to a workspace), else the
    deployment default. Never a tool argument."""
    return credential_workspace or DEFAULT_WORKSPACE


@dataclass(frozen=True, slots=True)
class CatalogueTool(Generic[Req, Resp]):
    """One agent tool (see the module docstring for the fields)."""

    name: str
    request: type[Req]
    response: type[Resp]
    run: Callable[[Runtime, Viewer, Req], Awaitable[Resp]]
    description: str
    read_only: bool = True
    operator_only: frozenset[str] = frozenset()
    arg_notes: Mapping[str, str] = field(default_factory=dict)
    http_status: int = 200
    budget: Callable[[Req], int | None] | None = None
    """The most bytes a model-facing answer to this request may take (``None``: no budget); ``fit`` drops
    the lowest-ranked items of the answer's lists until it fits."""

    @property
    def hidden(self) -> frozenset[str]:
        """Request fields a model never sets (identity + this tool's operator-only knobs)."""
        return (IDENTITY_FIELDS | self.operator_only) & set(self.request.model_fields)

    @property
    def has_diagnostics(self) -> bool:
        return DIAGNOSTICS in self.response.model_fields

    @property
    def http_path(self) -> str:
        return f"/tools/{self.name}"


# ---- the model-facing contract ----------------------------------------------------------------------------
def model_schema(tool: CatalogueTool[Any, Any]) -> dict[str, Any]:
    """The JSON Schema a model sees (MCP ``inputSchema``, the RPC tool schema): no identity field, no
    operator knob, a description on every property."""
    schema: dict[str, Any] = tool.request.model_json_schema(by_alias=True)
    props: dict[str, Any] = {k: dict(v) for k, v in schema.get("properties", {}).items() if k not in tool.hidden}
    for name, note in tool.arg_notes.items():
        if name in props and not props[name].get("description"):
            props[name]["description"] = note
    if tool.has_diagnostics:
        props[DIAGNOSTICS] = {"type": "boolean", "default": False, "description": DIAGNOSTICS_NOTE}
    schema["properties"] = props
    required = [r for r in schema.get("required", []) if r in props]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return schema


def _field_of(error: Mapping[str, Any]) -> str:
    parts = [str(p) for p in error.get("loc", ())]
    inner = (error.get("ctx") or {}).get("path")
    if isinstance(inner, str) and inner:
        parts.append(inner)
    return ".".join(parts) or "request"


def parse(
    tool: CatalogueTool[Req, Any], arguments: Mapping[str, Any], viewer: Viewer, workspace: str | None = None
) -> tuple[Req, bool]:
    """A model-facing call's request and whether it asked for diagnostics; ``InvalidPayloadError`` (422)
    naming the field otherwise."""
    args = dict(arguments)
    want = args.pop(DIAGNOSTICS, False) if tool.has_diagnostics else False
    if not isinstance(want, bool):
        raise InvalidPayloadError(f"{DIAGNOSTICS}: must be true or false", field=DIAGNOSTICS)
    server = {"workspace": workspace_for(workspace)}
    for name in sorted(tool.hidden & set(args)):
        value = args.pop(name)
        default = server.get(name, tool.request.model_fields[name].default)
        if value != default:  # the server's own value is harmless (clients that send defaults); no other
            why = "comes from your credential" if name in IDENTITY_FIELDS else "is not a tool argument"
            raise InvalidPayloadError(f"{name}: {why}; leave it out", field=name)
    if "workspace" in tool.hidden:
        args["workspace"] = server["workspace"]
    try:
        return tool.request.model_validate(args), want
    except ValidationError as exc:
        first = exc.errors()[0]
        where = _field_of(first)
        raise InvalidPayloadError(f"{where}: {first['msg']}", field=where) from exc


def _size(data: Any) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str).encode())


def fit(data: dict[str, Any], budget: int) -> dict[str, Any]:
    """``data`` within ``budget`` bytes of JSON: the last (lowest-ranked) items of its ranked lists are
    dropped — paths and diffs first, passages last — keeping at least one passage."""
    out = dict(data)
    for key in RANKED_LISTS:
        items = list(out.get(key) or [])
        keep = 1 if key == "passages" else 0
        while len(items) > keep and _size(out) > budget:
            items.pop()
            out[key] = items
    return out


def dump(
    tool: CatalogueTool[Req, Any], response: BaseModel, diagnostics: bool, request: Req | None = None
) -> dict[str, Any]:
    """What a model-facing door returns: the response, without diagnostics unless they were asked for,
    within the request's budget (``CatalogueTool.budget``; diagnostics, when asked, are on top of it)."""
    exclude = {DIAGNOSTICS} if tool.has_diagnostics else None
    data = response.model_dump(mode="json", exclude=exclude)
    budget = tool.budget(request) if tool.budget is not None and request is not None else None
    if budget is not None:
        data = fit(data, budget)
    if tool.has_diagnostics and diagnostics:
        data[DIAGNOSTICS] = response.model_dump(mode="json", include={DIAGNOSTICS})[DIAGNOSTICS]
    return data
