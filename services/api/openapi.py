"""The served OpenAPI document: the ingress body is the real ``ChangeEnvelope`` schema (the routes read
the raw body to validate it the way ingest does, so FastAPI cannot derive it), and no FastAPI default
error schema is left (every error is ``ErrorBody``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from schemas.envelope import ChangeEnvelope

REF = "#/components/schemas/{model}"


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            components = doc.setdefault("components", {}).setdefault("schemas", {})
            envelope = ChangeEnvelope.model_json_schema(ref_template=REF, mode="validation")
            components.update(envelope.pop("$defs", {}))
            components["ChangeEnvelope"] = envelope
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
