-- consolidation: memory consolidation that supersedes, never deletes (seed 002, corrected).
-- A row is one merge: the survivor, the memories it absorbed, why, and exactly what changed so undo can put it
-- back — the absorbed memories' chunks that stopped ranking (hidden_chunks), the version each absorbed memory had
-- (an undo never resurrects a memory edited or forgotten since) and the facts whose validity was closed.
-- source_document_ids (survivor + absorbed) is what the row came from: it is shown only to a viewer who can see
-- every one of them (all-visible).
CREATE TABLE memory_consolidations (
    id                  uuid PRIMARY KEY,
    workspace           text NOT NULL,
    run_id              uuid NOT NULL,
    survivor_id         uuid NOT NULL REFERENCES documents (id),
    absorbed_ids        uuid[] NOT NULL,
    absorbed_versions   integer[] NOT NULL,
    source_document_ids uuid[] NOT NULL,
    reason              text NOT NULL CHECK (reason IN ('exact', 'similar', 'contradiction')),
    similarity          real,
    hidden_chunks       uuid[] NOT NULL,
    fact_changes        jsonb NOT NULL DEFAULT '[]',
    created_at          timestamptz NOT NULL DEFAULT now(),
    created_by          text NOT NULL,
    undone_at           timestamptz,
    undone_by           text
);
CREATE INDEX memory_consolidations_recent ON memory_consolidations (workspace, created_at DESC);
CREATE INDEX memory_consolidations_absorbed ON memory_consolidations USING gin (absorbed_ids) WHERE undone_at IS NULL;

-- The absorbed memories' chunks stop ranking from the survivor's time on (hidden_from): a query about the present
-- no longer sees them, a query as of an earlier time still does (the bi-temporal view of a superseded statement).
-- Every arm's scope (retriever/repository.py scope_where) filters on it; undo deletes the merge's rows.
CREATE TABLE memory_hidden (
    chunk_id          uuid PRIMARY KEY,
    document_id       uuid NOT NULL,
    consolidation_id  uuid NOT NULL REFERENCES memory_consolidations (id),
    hidden_from       timestamptz NOT NULL
);
CREATE INDEX memory_hidden_consolidation ON memory_hidden (consolidation_id);
