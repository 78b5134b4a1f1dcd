"""Procedure proposals (issue 23 §3): a procedural-memory draft an agent files (``propose_procedure``,
``POST /v1/procedure-proposals``) that is not searchable until a human approves it
(``POST /v1/procedure-proposals/{id}/approve``); ``/reject`` keeps the row. Approving publishes the draft as a
procedure (``schemas.procedures.ProcedureSpec``) through the procedure path.

One source: the classes are the agent SDK's (:mod:`orgmem_sdk.procedure_models`), re-exported here.
"""

from __future__ import annotations

from orgmem_sdk.procedure_models import (
    DecideProposalRequest,
    ProcedureProposal,
    ProcedureProposalList,
    ProposalOrigin,
    ProposalStatus,
    ProposeProcedureRequest,
)

__all__ = [
    "DecideProposalRequest",
    "ProcedureProposal",
    "ProcedureProposalList",
    "ProposalOrigin",
    "ProposalStatus",
    "ProposeProcedureRequest",
]
