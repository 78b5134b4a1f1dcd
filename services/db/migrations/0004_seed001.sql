-- 0004: seed-001 read models and write-backs: Worldbuilder profile cache (keyed by evidence-document set),
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
