-- 0002: the governed bi-temporal graph (conflicts stage writes, services/graph/reads.py reads),
-- person merge proposals and collaboration edges.
--
-- People ARE entities: a person's entity row has id = people.id (type 'person'); a document's
-- entity row has id = documents.id (type 'document'). Every other entity has a deterministic id
-- from its normalized name and is found again through entity_aliases (dedup).
-- Facts carry both time axes: world (valid_from / valid_to) and belief (recorded_at / invalidated_at).
-- ACL is not stored on facts: reads join fact_evidence -> documents.principals (all-visible rule),
-- so ACL changes and tombstones take effect at once.

CREATE TABLE entities (
    id           uuid PRIMARY KEY,
    workspace    text NOT NULL,
    type         text NOT NULL,
    name         text NOT NULL,
    norm_name    text NOT NULL,
    merged_into  uuid REFERENCES entities (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entities_name ON entities (workspace, norm_name);
CREATE INDEX entities_type_name ON entities (workspace, type, norm_name);

-- Normalized names (and identity keys rendered as 'ns:key') that resolve to an entity.
CREATE TABLE entity_aliases (
    workspace  text NOT NULL,
    type       text NOT NULL,
    alias      text NOT NULL,
    entity_id  uuid NOT NULL REFERENCES entities (id),
    PRIMARY KEY (workspace, type, alias)
);
CREATE INDEX entity_aliases_entity ON entity_aliases (entity_id);
CREATE INDEX entity_aliases_alias ON entity_aliases (workspace, alias);

-- Documents that named an entity (its evidence for entity-level ACL).
CREATE TABLE entity_evidence (
    entity_id    uuid NOT NULL REFERENCES entities (id),
    document_id  uuid NOT NULL REFERENCES documents (id),
    PRIMARY KEY (entity_id, document_id)
);
CREATE INDEX entity_evidence_document ON entity_evidence (document_id);

-- Claims (object_id NULL, value set) and relationships (object_id set) in one table.
CREATE TABLE facts (
    id              uuid PRIMARY KEY,
    workspace       text NOT NULL,
    subject_id      uuid NOT NULL REFERENCES entities (id),
    predicate       text NOT NULL,
    object_id       uuid REFERENCES entities (id),
    value           text,
    valid_from      timestamptz NOT NULL,
    valid_to        timestamptz,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    invalidated_at  timestamptz,
    time_grain      text NOT NULL DEFAULT 'day'
                    CHECK (time_grain IN ('day', 'month', 'quarter', 'year', 'unknown')),
    confidence      real NOT NULL,
    status          text NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'superseded', 'corrected', 'retracted', 'merged')),
    closed_by       uuid,
    source          text NOT NULL DEFAULT 'pattern',
    CHECK ((object_id IS NULL) <> (value IS NULL)),
    CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
CREATE INDEX facts_subject ON facts (subject_id, predicate, valid_from);
CREATE INDEX facts_object ON facts (object_id, predicate, valid_from) WHERE object_id IS NOT NULL;
CREATE INDEX facts_subject_current ON facts (subject_id, predicate) WHERE invalidated_at IS NULL AND valid_to IS NULL;
CREATE INDEX facts_object_current ON facts (object_id, predicate)
    WHERE invalidated_at IS NULL AND valid_to IS NULL AND object_id IS NOT NULL;
CREATE INDEX facts_world ON facts USING gist (tstzrange(valid_from, valid_to, '[)'));
CREATE INDEX facts_belief ON facts USING gist (tstzrange(recorded_at, invalidated_at, '[)'));

CREATE TABLE fact_evidence (
    fact_id      uuid NOT NULL REFERENCES facts (id),
    document_id  uuid NOT NULL REFERENCES documents (id),
    chunk_id     uuid,
    span_start   integer NOT NULL DEFAULT 0,
    span_end     integer NOT NULL DEFAULT 0,
    rule         text NOT NULL DEFAULT '',
    confidence   real NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (fact_id, document_id, span_start, span_end)
);
CREATE INDEX fact_evidence_document ON fact_evidence (document_id);

-- Name similarity never merges people on its own: it files a proposal for a human / verified key.
CREATE TABLE person_merge_proposals (
    workspace    text NOT NULL,
    person_a     uuid NOT NULL REFERENCES people (id),
    person_b     uuid NOT NULL REFERENCES people (id),
    reason       text NOT NULL,
    score        real NOT NULL,
    status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'accepted', 'rejected', 'merged')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, person_a, person_b),
    CHECK (person_a < person_b)
);

-- Every merge that happened, with the key that justified it (merges are explainable).
CREATE TABLE person_merges (
    workspace   text NOT NULL,
    source_id   uuid NOT NULL REFERENCES people (id),
    target_id   uuid NOT NULL REFERENCES people (id),
    reason      text NOT NULL,
    merged_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, source_id)
);

-- Collaboration: per-document contributions (replaced on every version, so replays never double
-- count) and the aggregated edges. weight is the decayed weight AT last_seen; readers multiply by
-- 2^(-(now - last_seen) / half_life).
CREATE TABLE collab_contributions (
    document_id  uuid NOT NULL REFERENCES documents (id),
    workspace    text NOT NULL,
    a_kind       text NOT NULL,
    a_id         uuid NOT NULL,
    b_kind       text NOT NULL,
    b_id         uuid NOT NULL,
    reason       text NOT NULL,
    weight       real NOT NULL,
    event_time   timestamptz NOT NULL,
    PRIMARY KEY (document_id, a_kind, a_id, b_kind, b_id, reason)
);
CREATE INDEX collab_contributions_pair ON collab_contributions (workspace, a_id, b_id);

CREATE TABLE collaboration_edges (
    workspace   text NOT NULL,
    a_kind      text NOT NULL,
    a_id        uuid NOT NULL,
    b_kind      text NOT NULL,
    b_id        uuid NOT NULL,
    count       integer NOT NULL,
    last_seen   timestamptz NOT NULL,
    weight      double precision NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, a_id, b_id)
);
CREATE INDEX collaboration_edges_b ON collaboration_edges (workspace, b_id);
