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
    "query_facts.request.v1": "schemas.graph:QueryFactsRequest",
    "query_facts.response.v1": "schemas.graph:FactsResponse",
    "person_card.v1": "schemas.graph:PersonCard",
    "entity_card.v1": "schemas.graph:EntityCard",
    "worldbuilder_kb.request.v1": "schemas.worldbuilder:WorldbuilderKbRequest",
    "worldbuilder_kb.response.v1": "schemas.worldbuilder:WorldbuilderKbResponse",
    "worldbuilder_lookup.request.v1": "schemas.worldbuilder:WorldbuilderLookupRequest",
    "worldbuilder_lookup.response.v1": "schemas.worldbuilder:WorldbuilderLookupResponse",
    "procedural_memory.create.v1": "schemas.procedures:CreateProcedureRequest",
    "procedural_memory.detail.v1": "schemas.procedures:ProcedureDetail",
    "search_procedural_memory.request.v1": "schemas.procedures:SearchProceduralMemoryRequest",
    "search_procedural_memory.response.v1": "schemas.procedures:SearchProceduralMemoryResponse",
    "taxonomy_proposal.v1": "schemas.taxonomy:Proposal",
    "taxonomy_proposals.list.v1": "schemas.taxonomy:ProposalList",
    "promotion.request.v1": "schemas.taxonomy:PromotionRequest",
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
