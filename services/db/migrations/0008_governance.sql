-- 0008: governance — budgets and refusals, retention policies and purge audit, legal holds,
-- ACL history (permission history), ingress audit, and the document ids of every retrieval audit row.

-- Daily token budgets per workspace (and optionally per model: '*' = every model).
CREATE TABLE budgets (
    workspace     text NOT NULL,
    model         text NOT NULL DEFAULT '*',
    daily_tokens  bigint NOT NULL CHECK (daily_tokens >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    updated_by    text,
    PRIMARY KEY (workspace, model)
);

-- Optional LLM work that a budget stopped, with its reason (the core pipeline is never stopped).
CREATE TABLE spend_refusals (
    day        date NOT NULL,
    workspace  text NOT NULL,
    model      text NOT NULL,
    purpose    text NOT NULL,
    reason     text NOT NULL,
    count      bigint NOT NULL DEFAULT 0,
    last_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (day, workspace, model, purpose, reason)
);

-- Retention per workspace x source system x kind ('*' = any). The most specific policy wins.
CREATE TABLE retention_policies (
    workspace                    text NOT NULL,
    source_system                text NOT NULL DEFAULT '*',
    kind                         text NOT NULL DEFAULT '*',
    max_age_days                 integer CHECK (max_age_days IS NULL OR max_age_days > 0),
    purge_tombstoned_after_days  integer CHECK (purge_tombstoned_after_days IS NULL OR purge_tombstoned_after_days >= 0),
    updated_at                   timestamptz NOT NULL DEFAULT now(),
    updated_by                   text,
    PRIMARY KEY (workspace, source_system, kind)
);

-- One row per purge batch: who, which policy, what was removed (counts and the document ids).
CREATE TABLE retention_audit (
    id                bigserial PRIMARY KEY,
    run_id            uuid NOT NULL,
    at                timestamptz NOT NULL DEFAULT now(),
    actor             text NOT NULL,
    workspace         text NOT NULL,
    policy            jsonb NOT NULL,
    reason            text NOT NULL CHECK (reason IN ('max_age', 'tombstoned')),
    documents         integer NOT NULL,
    chunks            integer NOT NULL,
    versions          integer NOT NULL,
    evidence_links    integer NOT NULL,
    facts_retracted   integer NOT NULL,
    blobs             integer NOT NULL,
    document_ids      uuid[] NOT NULL
);
CREATE INDEX retention_audit_at ON retention_audit (at);

-- Archived envelope lines still to be blanked in the object store (written in the purge transaction,
-- drained after commit, retried by the next run), so a purge never leaves a blob behind.
CREATE TABLE retention_blob_queue (
    object_key  text NOT NULL,
    line        integer NOT NULL,
    queued_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (object_key, line)
);

CREATE TABLE legal_holds (
    id             uuid PRIMARY KEY,
    workspace      text NOT NULL,
    source_system  text,
    document_ids   uuid[],
    person_id      uuid,
    from_time      timestamptz,
    to_time        timestamptz,
    reason         text NOT NULL,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    released_at    timestamptz,
    released_by    text
);
CREATE INDEX legal_holds_active ON legal_holds (workspace) WHERE released_at IS NULL;

-- ACL history: every applied ACL state (and tombstone / revival) of a document with the time it took
-- effect; a state is valid until the next row's valid_from. Written by ingest in the same transaction
-- as the document (services/governance/acl_history.py), so replay and rebuild record it too.
CREATE TABLE acl_history (
    document_id  uuid NOT NULL REFERENCES documents (id),
    valid_from   timestamptz NOT NULL,
    principals   text[] NOT NULL,
    deleted      boolean NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, valid_from, deleted)
);

-- Envelopes accepted at the HTTP ingress (who sent what, where it landed).
CREATE TABLE ingress_audit (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    caller         text NOT NULL,
    envelope_id    uuid NOT NULL,
    workspace      text NOT NULL,
    source_system  text NOT NULL,
    external_id    text NOT NULL,
    op             text NOT NULL,
    topic          text NOT NULL,
    partition      integer NOT NULL,
    "offset"       bigint NOT NULL
);
CREATE INDEX ingress_audit_at ON ingress_audit (at);

-- Retrieval audit: the documents behind the returned chunks, written with the row (chunk ids change
-- with versions, so "who saw document D" must not depend on today's chunks).
ALTER TABLE retrieval_audit ADD COLUMN returned_documents uuid[] NOT NULL DEFAULT '{}';
CREATE INDEX retrieval_audit_documents ON retrieval_audit USING gin (returned_documents);
CREATE INDEX retrieval_audit_viewer ON retrieval_audit (viewer, at);

-- Records processed per stage over the last minute (admin health) without scanning every claim.
CREATE INDEX processed_events_recent ON processed_events (stage, processed_at);

-- Documents retention purged, with the newest event time they had: ingest skips an envelope of a
-- purged document that is not newer (a replay or rebuild of the infinite envelope log must not bring
-- purged data back). A genuinely newer envelope (the source re-created the item) is ingested.
CREATE TABLE purged_documents (
    document_id    uuid PRIMARY KEY,
    workspace      text NOT NULL,
    source_system  text NOT NULL,
    external_id    text NOT NULL,
    purged_through timestamptz NOT NULL,
    purged_at      timestamptz NOT NULL DEFAULT now(),
    run_id         uuid NOT NULL
);
