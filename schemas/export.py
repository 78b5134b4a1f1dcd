"""``python -m schemas.export``: write the JSON Schema of every contract into ``schemas/json/``.

The files are checked in; a unit test fails when they drift from the models.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from pydantic import BaseModel

OUT = Path(__file__).parent / "json"
CONTRACTS: dict[str, str] = {
    "change_envelope.v1": "schemas.envelope:ChangeEnvelope",
    "chunks_to_embed.v1": "schemas.events:ChunksToEmbed",
    "document_event.v1": "schemas.events:DocumentEvent",
    "graph_event.v1": "schemas.graph:GraphEvent",
    "retrieve_context.request.v1": "schemas.tools:RetrieveContextRequest",
    "retrieve_context.response.v1": "schemas.tools:RetrieveContextResponse",
    "admin.health.v1": "schemas.admin:AdminHealth",
    "admin.spend.v1": "schemas.admin:SpendReport",
    "admin.budget_request.v1": "schemas.admin:BudgetRequest",
    "admin.retention_policy.v1": "schemas.admin:RetentionPolicy",
    "admin.retention_report.v1": "schemas.admin:RetentionReport",
    "admin.legal_hold_request.v1": "schemas.admin:LegalHoldRequest",
    "admin.legal_hold.v1": "schemas.admin:LegalHold",
    "admin.retrieval_audit_page.v1": "schemas.admin:RetrievalAuditPage",
    "admin.ingress_audit_page.v1": "schemas.admin:IngressAuditPage",
    "admin.retention_audit_page.v1": "schemas.admin:PurgeAuditPage",
    "admin.document_access.v1": "schemas.admin:DocumentAccess",
    "admin.viewer_access.v1": "schemas.admin:ViewerAccess",
}


def load(ref: str) -> type[BaseModel] | None:
    module, _, name = ref.partition(":")
    try:
        model = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def rendered() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, ref in CONTRACTS.items():
        model = load(ref)
        if model is not None:
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
