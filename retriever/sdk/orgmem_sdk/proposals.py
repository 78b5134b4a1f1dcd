"""Procedure proposals on the client (the base of :class:`orgmem_sdk.client.OrgMemoryClient`, over its two
transports): ``propose_procedure`` files a draft (``POST /v1/procedure-proposals``, or the ``propose_procedure`` RPC
tool) that nobody can search until a human approves it; ``list_procedure_proposals``, ``approve_procedure_proposal``
and ``reject_procedure_proposal`` are the reviewer's calls (HTTP only)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel

from orgmem_sdk.errors import validated
from orgmem_sdk.http_transport import HttpTransport
from orgmem_sdk.kafka_transport import KafkaTransport
from orgmem_sdk.procedure_models import (
    DecideProposalRequest,
    ProcedureProposal,
    ProcedureProposalList,
    ProposalStatus,
    ProposeProcedureRequest,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class ProposalCalls(HttpTransport, KafkaTransport):
    """The proposal verbs over the client's two transports (``_retrying`` is the client's)."""

    timeout: float

    if TYPE_CHECKING:  # provided by OrgMemoryClient

        async def _retrying(self, what: str, attempt_fn: Callable[[], Awaitable[T]]) -> T: ...

    async def propose_procedure(
        self,
        title: str,
        steps: Sequence[str],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
        **fields: Any,
    ) -> ProcedureProposal:
        """File a procedure draft as ``principal_id``; ``fields``: ``description``, ``when_to_use``, ``tools``,
        ``scope`` (who would see it once approved; default the caller), ``source_ids`` (documents or memories it
        is based on), ``source`` (agent, session_id, event_id: a retry is the same proposal), ``workspace``."""
        req = validated(ProposeProcedureRequest, {"title": title, "steps": list(steps), **fields})
        budget = timeout or self.timeout
        if self.transport == "http":
            return await self._retrying(
                "propose_procedure",
                lambda: self._http_call(
                    "POST", "/v1/procedure-proposals", req, ProcedureProposal, principal_id, groups, budget
                ),
            )
        return await self._retrying(
            "propose_procedure",
            lambda: self._kafka_call("propose_procedure", req, ProcedureProposal, principal_id, groups or (), budget),
        )

    async def list_procedure_proposals(
        self,
        status: ProposalStatus | None = None,
        *,
        principal_id: str | None = None,
        groups: Sequence[str] | None = None,
        workspace: str = "default",
        limit: int = 50,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> ProcedureProposalList:
        """The proposals the viewer may see (its scope, every source visible), newest first."""
        self._http_only("list_procedure_proposals")
        query: Mapping[str, Any] = {"workspace": workspace, "limit": limit, **({"status": status} if status else {})}
        path = f"/v1/procedure-proposals?{urlencode(query)}"
        return await self._retrying(
            "list_procedure_proposals",
            lambda: self._http_call(
                "GET", path, None, ProcedureProposalList, principal_id, groups, timeout or self.timeout
            ),
        )

    async def _decide(
        self,
        verb: Literal["approve", "reject"],
        proposal_id: str,
        principal_id: str | None,
        groups: Sequence[str] | None,
        reason: str | None,
        workspace: str,
        timeout: float | None,  # noqa: ASYNC109 - a per-call budget
    ) -> ProcedureProposal:
        self._http_only(f"{verb}_procedure_proposal")
        body = validated(DecideProposalRequest, {"reason": reason})
        path = f"/v1/procedure-proposals/{quote(proposal_id, safe='')}/{verb}?{urlencode({'workspace': workspace})}"
        return await self._retrying(
            f"{verb}_procedure_proposal",
            lambda: self._http_call(
                "POST", path, body, ProcedureProposal, principal_id, groups, timeout or self.timeout
            ),
        )

    async def approve_procedure_proposal(
        self,
        proposal_id: str,
        *,
        principal_id: str | None = None,
        groups: Sequence[str] | None = None,
        reason: str | None = None,
        workspace: str = "default",
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> ProcedureProposal:
        """Publish the draft as a procedure (an admin, or a viewer holding its whole scope); idempotent."""
        return await self._decide("approve", proposal_id, principal_id, groups, reason, workspace, timeout)

    async def reject_procedure_proposal(
        self,
        proposal_id: str,
        *,
        principal_id: str | None = None,
        groups: Sequence[str] | None = None,
        reason: str | None = None,
        workspace: str = "default",
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> ProcedureProposal:
        """Keep the draft unpublished for good; idempotent."""
        return await self._decide("reject", proposal_id, principal_id, groups, reason, workspace, timeout)
