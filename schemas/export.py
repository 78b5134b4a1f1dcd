"""``python -m schemas.export``: write the JSON Schema of every contract into ``schemas/json/``.

The files are checked in; a unit test fails when they drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas import admin
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from schemas.graph import GraphEvent
from schemas.memory import RememberRequest, RememberResponse
from schemas.tools import RetrieveContextRequest, RetrieveContextResponse

OUT = Path(__file__).parent / "json"
CONTRACTS: dict[str, type[BaseModel]] = {
    "change_envelope.v1": ChangeEnvelope,
    "chunks_to_embed.v1": ChunksToEmbed,
    "document_event.v1": DocumentEvent,
    "graph_event.v1": GraphEvent,
    "retrieve_context.request.v1": RetrieveContextRequest,
    "retrieve_context.response.v1": RetrieveContextResponse,
    "admin.health.v1": admin.AdminHealth,
    "admin.spend.v1": admin.SpendReport,
    "admin.budget_request.v1": admin.BudgetRequest,
    "admin.retention_policy.v1": admin.RetentionPolicy,
    "admin.retention_report.v1": admin.RetentionReport,
    "admin.legal_hold_request.v1": admin.LegalHoldRequest,
    "admin.legal_hold.v1": admin.LegalHold,
    "admin.retrieval_audit_page.v1": admin.RetrievalAuditPage,
    "admin.ingress_audit_page.v1": admin.IngressAuditPage,
    "admin.retention_audit_page.v1": admin.PurgeAuditPage,
    "admin.document_access.v1": admin.DocumentAccess,
    "admin.viewer_access.v1": admin.ViewerAccess,
    "remember.request.v1": RememberRequest,
    "remember.response.v1": RememberResponse,
}
"""Every exported contract, imported statically: a renamed or removed model fails at import, never skipped."""


def rendered() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, model in CONTRACTS.items():
        schema = model.model_json_schema()
        schema["$id"] = f"https://orgmem.dev/schemas/{name}.schema.json"
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for fname, text in rendered().items():
        (OUT / fname).write_text(text)
        print(f"wrote schemas/json/{fname}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
