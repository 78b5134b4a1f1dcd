"""``orgmem_sdk`` ships alone: it imports nothing of the server (checked on its AST and by importing it in a
fresh interpreter whose first ``sys.path`` entry holds a builder's ``services.py``, as ``adk api_server``
arranges), and its wire contracts are the server's — one source: ``schemas.tools``, ``schemas.preload``,
``schemas.memory``, ``schemas.procedure_proposals`` and the value rules of ``schemas.validation`` re-export
the SDK's very classes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import schemas.envelope as server_envelope
import schemas.memory as server_memory
import schemas.preload as server_preload
import schemas.procedure_proposals as server_proposals
import schemas.tools as server_tools
import schemas.validation as server_validation
from orgmem_sdk import memory_models as sdk_memory
from orgmem_sdk import models as sdk
from orgmem_sdk import procedure_models as sdk_proposals
from orgmem_sdk import validation as sdk_validation
from orgmem_sdk.client import validated
from orgmem_sdk.errors import InvalidRequestError

ROOT = Path(__file__).resolve().parents[3]
SDK_DIR = ROOT / "retriever" / "sdk"
SERVER_PACKAGES = {"services", "schemas", "retriever", "ingest", "embedder", "extractor"}
WIRE = [
    (server_tools, sdk, "SearchKnowledgeBaseRequest"),
    (server_tools, sdk, "RetrieveContextRequest"),
    (server_tools, sdk, "RetrieveContextResponse"),
    (server_tools, sdk, "SearchKnowledgeBaseResponse"),
    (server_tools, sdk, "RpcRequest"),
    (server_tools, sdk, "RpcReply"),
    (server_memory, sdk_memory, "RememberRequest"),
    (server_memory, sdk_memory, "RememberResponse"),
    (server_memory, sdk_memory, "RememberBatchRequest"),
    (server_memory, sdk_memory, "RememberBatchResponse"),
    (server_memory, sdk_memory, "ForgetRequest"),
    (server_memory, sdk_memory, "ForgetResponse"),
    (server_memory, sdk_memory, "ListMemoriesRequest"),
    (server_memory, sdk_memory, "GetMemoryRequest"),
    (server_memory, sdk_memory, "UpdateMemoryRequest"),
    (server_memory, sdk_memory, "MemoryList"),
    (server_memory, sdk_memory, "MemoryDetail"),
    (server_memory, sdk_memory, "UpdateMemoryResponse"),
    (server_memory, sdk_memory, "WhoAmIResponse"),
    (server_preload, sdk, "PreloadRequest"),
    (server_preload, sdk, "PreloadResponse"),
    (server_proposals, sdk_proposals, "ProposeProcedureRequest"),
    (server_proposals, sdk_proposals, "ProcedureProposal"),
    (server_proposals, sdk_proposals, "ProcedureProposalList"),
    (server_proposals, sdk_proposals, "DecideProposalRequest"),
    (server_validation, sdk_validation, "storable"),
    (server_validation, sdk_validation, "utc_in_range"),
    (server_validation, sdk_validation, "BoundedDatetime"),
    (server_envelope, sdk_validation, "Principal"),
    (server_envelope, sdk_validation, "PRINCIPAL_RE"),
]


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


@pytest.mark.parametrize(("server", "mine", "name"), WIRE)
def test_the_servers_wire_contracts_are_the_sdks(server: Any, mine: Any, name: str) -> None:
    """One source: a copy (even an equal one) would drift; the server re-exports the SDK's object itself."""
    assert getattr(server, name) is getattr(mine, name)


def test_an_invalid_request_is_invalid_request_error_naming_the_field() -> None:
    with pytest.raises(InvalidRequestError) as err:
        validated(sdk.RetrieveContextRequest, {"query": "x", "filters": {"date_from": "not a date"}})
    assert err.value.field == "filters.date_from" and err.value.status == 422
    with pytest.raises(InvalidRequestError) as err2:
        validated(sdk_memory.RememberRequest, {"text": "x", "scope": "everyone"})
    assert err2.value.field == "scope"
