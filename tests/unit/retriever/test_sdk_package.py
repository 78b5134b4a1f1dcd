"""``orgmem_sdk`` ships alone: it imports nothing of the server (checked on its AST and by importing it in a
fresh interpreter whose first ``sys.path`` entry holds a builder's ``services.py``, as ``adk api_server``
arranges), and its copies of the wire contracts are the server's (same JSON Schemas, same verdicts)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import schemas.memory as server_memory
import schemas.preload as server_preload
import schemas.procedure_proposals as server_proposals
import schemas.tools as server_tools
from orgmem_sdk import memory_models as sdk_memory
from orgmem_sdk import models as sdk
from orgmem_sdk import procedure_models as sdk_proposals
from orgmem_sdk.client import validated
from orgmem_sdk.errors import InvalidRequestError

ROOT = Path(__file__).resolve().parents[3]
SDK_DIR = ROOT / "retriever" / "sdk"
SERVER_PACKAGES = {"services", "schemas", "retriever", "ingest", "embedder", "extractor"}
WIRE = [
    (server_tools, "SearchKnowledgeBaseRequest"),
    (server_tools, "RetrieveContextRequest"),
    (server_tools, "RetrieveContextResponse"),
    (server_tools, "SearchKnowledgeBaseResponse"),
    (server_tools, "RpcRequest"),
    (server_tools, "RpcReply"),
    (server_memory, "RememberRequest"),
    (server_memory, "RememberResponse"),
    (server_memory, "RememberBatchRequest"),
    (server_memory, "RememberBatchResponse"),
    (server_memory, "ForgetRequest"),
    (server_memory, "ForgetResponse"),
    (server_memory, "ListMemoriesRequest"),
    (server_memory, "GetMemoryRequest"),
    (server_memory, "UpdateMemoryRequest"),
    (server_memory, "MemoryList"),
    (server_memory, "MemoryDetail"),
    (server_memory, "UpdateMemoryResponse"),
    (server_memory, "WhoAmIResponse"),
    (server_preload, "PreloadRequest"),
    (server_preload, "PreloadResponse"),
    (server_proposals, "ProposeProcedureRequest"),
    (server_proposals, "ProcedureProposal"),
    (server_proposals, "ProcedureProposalList"),
    (server_proposals, "DecideProposalRequest"),
]


def _structure(schema: Any) -> Any:
    """A JSON Schema without its prose (descriptions may be reworded on the server without a wire change)."""
    if isinstance(schema, dict):
        return {k: _structure(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_structure(v) for v in schema]
    return schema


def test_the_sdk_imports_nothing_of_the_server() -> None:
    files = sorted((SDK_DIR / "orgmem_sdk").rglob("*.py"))
    assert len(files) >= 7
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in SERVER_PACKAGES]
    assert found == []


def test_the_sdk_imports_beside_a_builders_services_py(tmp_path: Path) -> None:
    """ADK puts the agents directory first on ``sys.path`` and imports its ``services.py`` as ``services``;
    the SDK (client, sync client, ADK service, LangChain retriever) still imports, and registers its
    scheme from inside that very ``services.py``."""
    (tmp_path / "services.py").write_text(
        "from orgmem_sdk.adk import register_org_memory_scheme\n\nregister_org_memory_scheme()\nBUILDER = True\n"
    )
    script = textwrap.dedent(
        """
        import json, sys
        import services  # the builder's module, as ADK imports it
        import orgmem_sdk, orgmem_sdk.adk, orgmem_sdk.langchain, orgmem_sdk.sync_client
        from google.adk.cli.service_registry import get_service_registry
        print(json.dumps({
            "builder": getattr(services, "BUILDER", False),
            "server_modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                     ("schemas", "retriever", "ingest", "embedder", "extractor")
                                     or m.startswith("services.")),
            "registered": "orgmem" in get_service_registry()._memory_factories,
        }))
        """
    )
    env = {"PYTHONPATH": f"{tmp_path}:{SDK_DIR}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"builder": True, "server_modules": [], "registered": True}


@pytest.mark.parametrize(("module", "name"), WIRE)
def test_wire_models_match_the_server(module: Any, name: str) -> None:
    server: type[BaseModel] = getattr(module, name)
    sdk_module = {server_memory: sdk_memory, server_proposals: sdk_proposals}.get(module, sdk)
    mine: type[BaseModel] = getattr(sdk_module, name)
    assert _structure(mine.model_json_schema()) == _structure(server.model_json_schema())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RetrieveContextRequest", {"query": "  who  ", "limit": 500, "max_tokens": 0}),
        ("RetrieveContextRequest", {"query": "a\x00b"}),
        ("RetrieveContextRequest", {"query": "x", "as_of": "0001-01-01T00:00:00+14:00"}),
        ("RetrieveContextRequest", {"query": "x", "filters": {"date_from": "2025-01-01T00:00:00"}}),
        ("RetrieveContextRequest", {"query": "x", "mode": "sideways"}),
        ("RetrieveContextRequest", {"query": "x", "principal_id": "user:x"}),
        ("RememberRequest", {"text": "t", "scope": "GROUP:6F1C2A9E-3B7D-5E4F-9A8B-0C1D2E3F4A5B"}),
        ("RememberRequest", {"text": "t", "scope": "team"}),
        ("RememberRequest", {"text": " "}),
        ("ListMemoriesRequest", {"limit": 0, "scope": "user"}),
        ("RpcRequest", {"viewer": {"principal_id": "group:6f1c2a9e-3b7d-5e4f-9a8b-0c1d2e3f4a5b"}, "request": {}}),
    ],
)
def test_wire_models_give_the_servers_verdicts(name: str, value: dict[str, Any]) -> None:
    def verdict(model: type[BaseModel]) -> Any:
        try:
            return model.model_validate(value).model_dump(mode="json")
        except ValidationError as exc:
            return [(e["loc"], e["type"]) for e in exc.errors()]

    server = getattr(server_tools, name, None) or getattr(server_memory, name)
    assert verdict(getattr(sdk, name, None) or getattr(sdk_memory, name)) == verdict(server)


def test_an_invalid_request_is_invalid_request_error_naming_the_field() -> None:
    with pytest.raises(InvalidRequestError) as err:
        validated(sdk.RetrieveContextRequest, {"query": "x", "filters": {"date_from": "not a date"}})
    assert err.value.field == "filters.date_from" and err.value.status == 422
    with pytest.raises(InvalidRequestError) as err2:
        validated(sdk_memory.RememberRequest, {"text": "x", "scope": "everyone"})
    assert err2.value.field == "scope"
