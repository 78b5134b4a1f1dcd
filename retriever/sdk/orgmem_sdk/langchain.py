"""LangChain adapter (optional extra ``langchain``): ``OrgMemoryRetriever``, a ``BaseRetriever`` over
``retrieve_context``. Each passage becomes a ``Document`` whose metadata carries its citation
(``citation`` number, source system, external id, url, event time, title, score, scope).

    retriever = OrgMemoryRetriever(client=OrgMemoryClient.http(url, key), principal_id="user:…")
    docs = await retriever.ainvoke("who owns billing?")

    docs = retriever.invoke("who owns billing?")  # sync: its own OrgMemorySyncClient, built on first use

The viewer is fixed on the retriever (the caller's authenticated user), never taken from the query.
``ainvoke`` uses ``client``; ``invoke`` uses ``sync_client`` when given, else builds one from a copy of
``client``'s settings (its own loop thread and connections; ``close()`` stops it).
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, PrivateAttr

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import ConfigurationError
from orgmem_sdk.models import RetrieveContextResponse
from orgmem_sdk.sync_client import OrgMemorySyncClient

_BUILD_LOCK = threading.Lock()


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
    _owns_sync: bool = PrivateAttr(default=False)

    def _request(self, query: str) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "limit": self.limit, "workspace": self.workspace}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        return body

    def _sync(self) -> OrgMemorySyncClient:
        with _BUILD_LOCK:
            if self.sync_client is None:
                if self.client is None:
                    raise ConfigurationError("OrgMemoryRetriever needs client or sync_client", setting="client")
                self.sync_client = OrgMemorySyncClient(self.client.copy())
                self._owns_sync = True
        return self.sync_client

    def close(self) -> None:
        """Stop the sync client this retriever built (a given one is the caller's to close)."""
        if self._owns_sync and self.sync_client is not None:
            self.sync_client.close()
            self.sync_client = None
            self._owns_sync = False

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        resp = self._sync().retrieve_context(self._request(query), principal_id=self.principal_id, groups=self.groups)
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
