"""LangChain adapter (optional extra ``langchain``): ``OrgMemoryRetriever``, a ``BaseRetriever`` over
``retrieve_context``. Each passage becomes a ``Document`` whose metadata carries its citation
(``citation`` number, source system, external id, url, event time, title, score, scope).

    retriever = OrgMemoryRetriever(client=OrgMemoryClient.http(url, key), principal_id="user:…")
    docs = await retriever.ainvoke("who owns billing?")

The viewer is fixed on the retriever (the caller's authenticated user), never taken from the query.
Give ``sync_client`` (``OrgMemorySyncClient``) for ``invoke``; ``ainvoke`` uses ``client``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from retriever.client import OrgMemoryClient
from retriever.sync_client import OrgMemorySyncClient
from schemas.tools import RetrieveContextResponse
from services.errors import ConfigurationError


def to_documents(response: RetrieveContextResponse) -> list[Document]:
    return [
        Document(
            page_content=p.text,
            id=str(p.chunk_id),
            metadata={
                "citation": n,
                "source_system": p.source_system,
                "external_id": p.external_id,
                "url": p.url,
                "event_time": p.event_time.isoformat(),
                "title": p.title,
                "score": p.score,
                "scope": p.scope,
                "document_id": str(p.document_id),
                "kind": p.kind,
            },
        )
        for n, p in enumerate(response.passages, 1)
    ]


class OrgMemoryRetriever(BaseRetriever):
    client: OrgMemoryClient | None = None
    sync_client: OrgMemorySyncClient | None = None
    principal_id: str | None = None
    groups: list[str] = Field(default_factory=list)
    limit: int = 10
    max_tokens: int | None = None
    workspace: str = "default"

    def _request(self, query: str) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "limit": self.limit, "workspace": self.workspace}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        return body

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self.sync_client is None:
            raise ConfigurationError("OrgMemoryRetriever.invoke needs sync_client", setting="sync_client")
        resp = self.sync_client.retrieve_context(
            self._request(query), principal_id=self.principal_id, groups=self.groups
        )
        return to_documents(resp)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.client is None:
            raise ConfigurationError("OrgMemoryRetriever.ainvoke needs client", setting="client")
        resp = await self.client.retrieve_context(
            self._request(query), principal_id=self.principal_id, groups=self.groups
        )
        return to_documents(resp)
