-- 0001: the write-path projection: documents, versions, chunks (FTS + vectors), people, participants,
-- delivery bookkeeping (processed events), spend and retrieval audit.
-- Runs with search_path = <projection schema>, public. The vector extension lives in public.

CREATE TABLE documents (
    id                  uuid PRIMARY KEY,
    workspace           text NOT NULL,
    source_system       text NOT NULL,
    external_id         text NOT NULL,
    url                 text,
    kind                text NOT NULL,
    title               text,
    thread_external_id  text,
    parent_external_id  text,
    author_person_id    uuid,
    event_time          timestamptz NOT NULL,
    deleted_at          timestamptz,
    current_version     integer NOT NULL DEFAULT 0,
    content_hash        text,
    principals          text[] NOT NULL DEFAULT '{}',
    acl_event_time      timestamptz,
    blob_key            text,
    structured_fields   jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace, source_system, external_id)
);
CREATE INDEX documents_principals_gin ON documents USING gin (principals);
CREATE INDEX documents_thread ON documents (workspace, source_system, thread_external_id);

CREATE TABLE document_versions (
    document_id   uuid NOT NULL REFERENCES documents (id),
    version       integer NOT NULL,
    envelope_id   uuid NOT NULL UNIQUE,
    op            text NOT NULL,
    event_time    timestamptz NOT NULL,
    content_hash  text,
    blob_key      text,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version)
);

-- Parent chunks carry readable section text; child chunks are embedded and ranked.
-- Only the current version's chunks are kept; principals/event_time/deleted are denormalised
-- from the document so ACL filters sit next to the HNSW and FTS scans.
CREATE TABLE chunks (
    id               uuid PRIMARY KEY,
    document_id      uuid NOT NULL REFERENCES documents (id),
    workspace        text NOT NULL,
    parent_id        uuid,
    is_parent        boolean NOT NULL,
    ordinal          integer NOT NULL,
    char_start       integer NOT NULL,
    char_end         integer NOT NULL,
    text             text NOT NULL,
    title            text,
    content_hash     text NOT NULL,
    tsv              tsvector,
    embedding        vector,
    embedding_model  text,
    principals       text[] NOT NULL DEFAULT '{}',
    event_time       timestamptz NOT NULL,
    source_system    text NOT NULL,
    kind             text NOT NULL,
    author_person_id uuid,
    deleted          boolean NOT NULL DEFAULT false,
    access_count     integer NOT NULL DEFAULT 0
);
CREATE INDEX chunks_document ON chunks (document_id);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv) WHERE NOT is_parent AND NOT deleted;
CREATE INDEX chunks_principals ON chunks USING gin (principals) WHERE NOT is_parent AND NOT deleted;
CREATE INDEX chunks_pending_embedding ON chunks (document_id) WHERE embedding IS NULL AND NOT is_parent;
CREATE INDEX chunks_workspace_time ON chunks (workspace, event_time) WHERE NOT is_parent AND NOT deleted;
-- HNSW indexes are per embedding model and dimension (expression + partial index); the embedder stage
-- creates the one it needs at start (see embedder/repository.py).

-- Embedding carry-over across versions, documents and replays: same text + same model -> same vector.
CREATE TABLE embedding_cache (
    content_hash     text NOT NULL,
    embedding_model  text NOT NULL,
    embedding        vector NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (content_hash, embedding_model)
);

CREATE TABLE people (
    id             uuid PRIMARY KEY,
    workspace      text NOT NULL,
    display_name   text,
    primary_email  text,
    merged_into    uuid REFERENCES people (id),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX people_workspace_name ON people (workspace, lower(display_name));

CREATE TABLE person_aliases (
    workspace      text NOT NULL,
    namespace      text NOT NULL,
    value          text NOT NULL,
    person_id      uuid NOT NULL REFERENCES people (id),
    verified       boolean NOT NULL DEFAULT false,
    source_system  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, namespace, value)
);
CREATE INDEX person_aliases_person ON person_aliases (person_id);

CREATE TABLE participants (
    document_id  uuid NOT NULL REFERENCES documents (id),
    person_id    uuid NOT NULL REFERENCES people (id),
    role         text NOT NULL,
    PRIMARY KEY (document_id, person_id, role)
);
CREATE INDEX participants_person ON participants (person_id);

-- Exactly-once effect: a stage's writes and its record of the event commit in one transaction.
CREATE TABLE processed_events (
    stage         text NOT NULL,
    event_key     text NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stage, event_key)
);

CREATE TABLE spend (
    day         date NOT NULL,
    workspace   text NOT NULL,
    provider    text NOT NULL,
    model       text NOT NULL,
    purpose     text NOT NULL,
    calls       bigint NOT NULL DEFAULT 0,
    items       bigint NOT NULL DEFAULT 0,
    tokens      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, workspace, provider, model, purpose)
);

CREATE TABLE retrieval_audit (
    id            bigserial PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    workspace     text NOT NULL,
    viewer        text,
    tool          text NOT NULL,
    query_hash    text NOT NULL,
    returned_ids  text[] NOT NULL DEFAULT '{}',
    latency_ms    double precision NOT NULL,
    diagnostics   jsonb
);
CREATE INDEX retrieval_audit_at ON retrieval_audit (at);
