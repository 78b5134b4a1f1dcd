-- 0007: seed-001 read models and write-backs: Worldbuilder profile cache (keyed by evidence-document set),
-- procedural memories (versioned, from `procedure` envelopes), taxonomy field-value proposals with their
-- webhook delivery log.

-- Derived profiles. evidence_key digests the viewer-visible evidence documents (id + version) and the
-- entity's facts, so a profile is shared only by viewers with the same visible evidence; reads re-ground.
CREATE TABLE worldbuilder_profiles (
    workspace     text NOT NULL,
    entity_id     uuid NOT NULL,
    evidence_key  text NOT NULL,
    profile       jsonb NOT NULL,
    built_at      timestamptz NOT NULL DEFAULT now(),
    hits          integer NOT NULL DEFAULT 0,
    last_hit_at   timestamptz,
    PRIMARY KEY (workspace, entity_id, evidence_key)
);

-- Procedural memory: every version of a procedure document (kind 'procedure'), written by ingest from
-- the envelope's ProcedureSpec. The document row holds the current version and the ACL.
CREATE TABLE procedure_versions (
    document_id    uuid NOT NULL REFERENCES documents (id),
    version        integer NOT NULL,
    workspace      text NOT NULL,
    name           text NOT NULL,
    norm_name      text NOT NULL,
    spec           jsonb NOT NULL,
    principals     text[] NOT NULL,
    event_time     timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    superseded_at  timestamptz,
    deleted_at     timestamptz,
    PRIMARY KEY (document_id, version)
);
CREATE INDEX procedure_versions_name ON procedure_versions (workspace, norm_name);

-- Taxonomy write-back: field-value proposals for registry slots with a platform_binding. One row per
-- (subject, slot, value) (id derived from them): an applied or rejected row is never re-opened.
CREATE TABLE taxonomy_proposals (
    id                  uuid PRIMARY KEY,
    workspace           text NOT NULL,
    subject_id          uuid NOT NULL,
    slot                text NOT NULL,
    predicate           text NOT NULL,
    host_value          text,
    proposed_value      text NOT NULL,
    proposed_norm       text NOT NULL,
    proposed_entity_id  uuid,
    evidence            uuid[] NOT NULL DEFAULT '{}',
    confidence          real NOT NULL,
    origin              text NOT NULL CHECK (origin IN ('extracted', 'promoted')),
    fact_id             uuid,
    host_entity_id      text,
    status              text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'applied', 'rejected', 'superseded')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    decided_at          timestamptz,
    delivered_at        timestamptz,
    delivery_attempts   integer NOT NULL DEFAULT 0
);
CREATE INDEX taxonomy_proposals_subject ON taxonomy_proposals (workspace, subject_id, slot);
CREATE INDEX taxonomy_proposals_status ON taxonomy_proposals (workspace, status, created_at);
CREATE INDEX taxonomy_proposals_pending ON taxonomy_proposals (created_at) WHERE delivered_at IS NULL AND status = 'open';

-- Every webhook delivery attempt.
CREATE TABLE taxonomy_proposal_deliveries (
    id           bigserial PRIMARY KEY,
    proposal_id  uuid NOT NULL REFERENCES taxonomy_proposals (id),
    attempt      integer NOT NULL,
    url          text NOT NULL,
    status_code  integer,
    ok           boolean NOT NULL,
    error        text,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX taxonomy_proposal_deliveries_proposal ON taxonomy_proposal_deliveries (proposal_id);
