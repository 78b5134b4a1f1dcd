-- 0015: procedure proposals (issue 23 §3): a procedural-memory draft an agent (the judge, the skill curator, any
-- agent with an agent key) files and a human approves before it is searchable. A pending or rejected proposal is
-- only this row: nothing is on the log, nothing ranks. Approve produces a `procedure` ChangeEnvelope through the
-- procedure path (services/procedures.py), so the procedure is versioned and searched like any other.
-- Visibility (services/procedure_proposals.py): the viewer holds one of `scope` (who would see the procedure)
-- and, when the proposal was derived from documents or memories (source_document_ids), sees every one of them
-- (all-visible, services/sources.py).
CREATE TABLE procedure_proposals (
    id                  uuid PRIMARY KEY,
    workspace           text NOT NULL,
    proposer            text NOT NULL,
    title               text NOT NULL,
    spec                jsonb NOT NULL,
    scope               text[] NOT NULL,
    source_document_ids uuid[] NOT NULL DEFAULT '{}',
    origin              jsonb NOT NULL DEFAULT '{}',
    origin_key          text,
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    reason              text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    decided_by          text,
    decided_at          timestamptz,
    procedure_id        uuid,
    envelope_id         uuid
);
-- a retried proposal from the same agent session event is the same proposal
CREATE UNIQUE INDEX procedure_proposals_origin ON procedure_proposals (workspace, proposer, origin_key)
    WHERE origin_key IS NOT NULL;
CREATE INDEX procedure_proposals_recent ON procedure_proposals (workspace, status, created_at DESC);
