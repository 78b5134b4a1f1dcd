"""``python -m schemas.export``: write the JSON Schema of every contract into ``schemas/json/``.

The files are checked in; a unit test fails when they drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentEvent
from schemas.graph import GraphEvent
from schemas.tools import RetrieveContextRequest, RetrieveContextResponse

OUT = Path(__file__).parent / "json"
CONTRACTS: dict[str, type[BaseModel]] = {
    "change_envelope.v1": ChangeEnvelope,
    "chunks_to_embed.v1": ChunksToEmbed,
    "document_event.v1": DocumentEvent,
    "graph_event.v1": GraphEvent,
    "retrieve_context.request.v1": RetrieveContextRequest,
    "retrieve_context.response.v1": RetrieveContextResponse,
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
