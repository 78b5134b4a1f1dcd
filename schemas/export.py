"""``python -m schemas.export``: write the JSON Schema of every contract into ``schemas/json/``.

The files are checked in; a unit test fails when they drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas import admin
from schemas.consolidation import ConsolidationList, UndoResult
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from schemas.graph import EntityCard, FactsResponse, GraphEvent, PersonCard, QueryFactsRequest
from schemas.memory import RememberRequest, RememberResponse
from schemas.preload import PreloadRequest, PreloadResponse
from schemas.procedures import (
    CreateProcedureRequest,
    ProcedureDetail,
    SearchProceduralMemoryRequest,
    SearchProceduralMemoryResponse,
)
from schemas.taxonomy import PromotionRequest, Proposal, ProposalList
from schemas.tools import RetrieveContextRequest, RetrieveContextResponse
from schemas.worldbuilder import (
    WorldbuilderKbRequest,
    WorldbuilderKbResponse,
    WorldbuilderLookupRequest,
    WorldbuilderLookupResponse,
)

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
    "preload.request.v1": PreloadRequest,
    "preload.response.v1": PreloadResponse,
    "consolidation.list.v1": ConsolidationList,
    "consolidation.undo.v1": UndoResult,
    "admin.pipeline_status.v1": admin.PipelineStatus,
    "admin.dead_letter_page.v1": admin.DeadLetterPage,
    "admin.redrive_request.v1": admin.RedriveRequest,
    "admin.replay_request.v1": admin.ReplayRequest,
    "admin.job.v1": admin.Job,
    "admin.why_not.v1": admin.WhyNot,
    "remember.request.v1": RememberRequest,
    "remember.response.v1": RememberResponse,
    "query_facts.request.v1": QueryFactsRequest,
    "query_facts.response.v1": FactsResponse,
    "person_card.v1": PersonCard,
    "entity_card.v1": EntityCard,
    "worldbuilder_kb.request.v1": WorldbuilderKbRequest,
    "worldbuilder_kb.response.v1": WorldbuilderKbResponse,
    "worldbuilder_lookup.request.v1": WorldbuilderLookupRequest,
    "worldbuilder_lookup.response.v1": WorldbuilderLookupResponse,
    "procedural_memory.create.v1": CreateProcedureRequest,
    "procedural_memory.detail.v1": ProcedureDetail,
    "search_procedural_memory.request.v1": SearchProceduralMemoryRequest,
    "search_procedural_memory.response.v1": SearchProceduralMemoryResponse,
    "taxonomy_proposal.v1": Proposal,
    "taxonomy_proposals.list.v1": ProposalList,
    "promotion.request.v1": PromotionRequest,
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
