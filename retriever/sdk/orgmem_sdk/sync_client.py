"""``OrgMemorySyncClient``: the blocking twin of ``OrgMemoryClient`` for scripts and sync frameworks.

It owns one event loop on a daemon thread and runs the async client's calls there, so both transports
(HTTP and Kafka request/reply), the retries and the typed errors are exactly the async client's.

    with OrgMemorySyncClient.http("http://127.0.0.1:8000", api_key) as om:
        ctx = om.retrieve_context({"query": "who owns billing?"}, principal_id="user:…")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.memory_models import (
    ForgetResponse,
    ListMemoriesRequest,
    MemoryDetail,
    MemoryList,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryResponse,
    WhoAmIResponse,
)
from orgmem_sdk.models import (
    PreloadRequest,
    PreloadResponse,
    RetrieveContextRequest,
    RetrieveContextResponse,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from orgmem_sdk.procedure_models import ProcedureProposal, ProcedureProposalList, ProposalStatus

T = TypeVar("T")


class OrgMemorySyncClient:
    def __init__(self, client: OrgMemoryClient) -> None:
        self.client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="orgmem-sync-client", daemon=True)
        self._thread.start()
        self._started = False

    @classmethod
    def http(cls, url: str, api_key: str, **kwargs: Any) -> OrgMemorySyncClient:
        return cls(OrgMemoryClient.http(url, api_key, **kwargs))

    @classmethod
    def kafka(cls, bootstrap_servers: str, **kwargs: Any) -> OrgMemorySyncClient:
        return cls(OrgMemoryClient.kafka(bootstrap_servers, **kwargs))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def start(self) -> None:
        if not self._started:
            self._run(self.client.start())
            self._started = True

    def close(self) -> None:
        try:
            if self._started:
                self._run(self.client.close())
                self._started = False
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> OrgMemorySyncClient:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def retrieve_context(
        self,
        request: RetrieveContextRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,
    ) -> RetrieveContextResponse:
        self.start()
        return self._run(
            self.client.retrieve_context(request, principal_id=principal_id, groups=groups, timeout=timeout)
        )

    def preload(
        self,
        request: PreloadRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,
    ) -> PreloadResponse:
        self.start()
        return self._run(self.client.preload(request, principal_id=principal_id, groups=groups, timeout=timeout))

    def search_knowledge_base(
        self,
        request: SearchKnowledgeBaseRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,
    ) -> SearchKnowledgeBaseResponse:
        self.start()
        return self._run(
            self.client.search_knowledge_base(request, principal_id=principal_id, groups=groups, timeout=timeout)
        )

    def remember(
        self,
        request: RememberRequest | dict[str, Any],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> RememberResponse:
        self.start()
        return self._run(self.client.remember(request, principal_id=principal_id, groups=groups, timeout=timeout))

    def forget(
        self, memory_id: str, *, principal_id: str, workspace: str = "default", timeout: float | None = None
    ) -> ForgetResponse:
        self.start()
        return self._run(self.client.forget(memory_id, principal_id=principal_id, workspace=workspace, timeout=timeout))

    def remember_batch(
        self,
        memories: Sequence[RememberRequest | dict[str, Any]],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> RememberBatchResponse:
        self.start()
        return self._run(
            self.client.remember_batch(memories, principal_id=principal_id, groups=groups, timeout=timeout)
        )

    def list_memories(
        self,
        request: ListMemoriesRequest | dict[str, Any] | None = None,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> MemoryList:
        self.start()
        return self._run(self.client.list_memories(request, principal_id=principal_id, groups=groups, timeout=timeout))

    def get_memory(
        self,
        memory_id: str,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        workspace: str = "default",
        timeout: float | None = None,
    ) -> MemoryDetail:
        self.start()
        return self._run(
            self.client.get_memory(
                memory_id, principal_id=principal_id, groups=groups, workspace=workspace, timeout=timeout
            )
        )

    def update_memory(
        self,
        memory_id: str,
        text: str,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        workspace: str = "default",
        timeout: float | None = None,
    ) -> UpdateMemoryResponse:
        self.start()
        return self._run(
            self.client.update_memory(
                memory_id, text, principal_id=principal_id, groups=groups, workspace=workspace, timeout=timeout
            )
        )

    def whoami(
        self, *, principal_id: str | None = None, groups: Sequence[str] | None = None, timeout: float | None = None
    ) -> WhoAmIResponse:
        self.start()
        return self._run(self.client.whoami(principal_id=principal_id, groups=groups, timeout=timeout))

    def propose_procedure(
        self,
        title: str,
        steps: Sequence[str],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> ProcedureProposal:
        self.start()
        return self._run(
            self.client.propose_procedure(
                title, steps, principal_id=principal_id, groups=groups, timeout=timeout, **fields
            )
        )

    def list_procedure_proposals(
        self, status: ProposalStatus | None = None, *, principal_id: str | None = None, **kwargs: Any
    ) -> ProcedureProposalList:
        self.start()
        return self._run(self.client.list_procedure_proposals(status, principal_id=principal_id, **kwargs))

    def approve_procedure_proposal(
        self, proposal_id: str, *, principal_id: str | None = None, **kwargs: Any
    ) -> ProcedureProposal:
        self.start()
        return self._run(self.client.approve_procedure_proposal(proposal_id, principal_id=principal_id, **kwargs))

    def reject_procedure_proposal(
        self, proposal_id: str, *, principal_id: str | None = None, **kwargs: Any
    ) -> ProcedureProposal:
        self.start()
        return self._run(self.client.reject_procedure_proposal(proposal_id, principal_id=principal_id, **kwargs))
