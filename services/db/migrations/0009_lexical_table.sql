-- 0009: the lexical arm's narrow table (issue 13 §5). The BM25 arm used to scan `chunks` through its GIN
-- index and then read each matching row of a ~4.5 kB-per-row heap (text, parent text, vector, toasted tsvector):
-- at 100k HERB chunks 7,400 heap pages per query. `chunk_lexemes` holds only what the lexical arm filters and
-- scores on — one row per live child chunk (not a parent, not tombstoned, with a tsvector) — so the same scan
-- touches ~10x fewer pages and the ACL (`principals`) and the terms (`tsv`) can be intersected in two GIN indexes
-- before any heap access.
--
-- Kept in step by triggers on `chunks`, so every path that writes or deletes chunks (ingest insert / re-version,
-- the index-context rewrite of a tsvector, the ACL and tombstone sync, retention purge, a rebuild's fresh
-- generation, COPY loads) updates it in the same transaction; nothing in the application writes it.
CREATE TABLE chunk_lexemes (
    id               uuid PRIMARY KEY,
    document_id      uuid NOT NULL,
    workspace        text NOT NULL,
    principals       text[] NOT NULL,
    source_system    text NOT NULL,
    kind             text NOT NULL,
    event_time       timestamptz NOT NULL,
    author_person_id uuid,
    tsv              tsvector NOT NULL,
    dl               integer NOT NULL -- length(tsv): number of distinct lexemes (BM25 document length)
);
CREATE INDEX chunk_lexemes_tsv ON chunk_lexemes USING gin (tsv);
CREATE INDEX chunk_lexemes_principals ON chunk_lexemes USING gin (principals);

INSERT INTO chunk_lexemes
SELECT id, document_id, workspace, principals, source_system, kind, event_time, author_person_id, tsv, length(tsv)
FROM chunks WHERE NOT is_parent AND NOT deleted AND tsv IS NOT NULL;

-- search_path is pinned to this schema: a trigger fired from a session of another generation's schema still
-- writes this schema's table
CREATE FUNCTION chunk_lexemes_upsert() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id THEN
        DELETE FROM chunk_lexemes WHERE id = OLD.id;
    END IF;
    IF NEW.is_parent OR NEW.deleted OR NEW.tsv IS NULL THEN
        DELETE FROM chunk_lexemes WHERE id = NEW.id;
    ELSE
        INSERT INTO chunk_lexemes
        VALUES (NEW.id, NEW.document_id, NEW.workspace, NEW.principals, NEW.source_system, NEW.kind,
                NEW.event_time, NEW.author_person_id, NEW.tsv, length(NEW.tsv))
        ON CONFLICT (id) DO UPDATE SET
            document_id = EXCLUDED.document_id, workspace = EXCLUDED.workspace, principals = EXCLUDED.principals,
            source_system = EXCLUDED.source_system, kind = EXCLUDED.kind, event_time = EXCLUDED.event_time,
            author_person_id = EXCLUDED.author_person_id, tsv = EXCLUDED.tsv, dl = EXCLUDED.dl;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION chunk_lexemes_delete() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM chunk_lexemes WHERE id = OLD.id;
    RETURN NULL;
END $$;

-- parents never have a row: the WHEN clauses skip them without calling the function
CREATE TRIGGER chunk_lexemes_insert AFTER INSERT ON chunks
    FOR EACH ROW WHEN (NOT NEW.is_parent AND NOT NEW.deleted AND NEW.tsv IS NOT NULL)
    EXECUTE FUNCTION chunk_lexemes_upsert();
CREATE TRIGGER chunk_lexemes_update
    AFTER UPDATE OF id, document_id, workspace, is_parent, deleted, principals, source_system, kind, event_time,
        author_person_id, tsv ON chunks
    FOR EACH ROW WHEN (NOT (OLD.is_parent AND NEW.is_parent))
    EXECUTE FUNCTION chunk_lexemes_upsert();
CREATE TRIGGER chunk_lexemes_delete AFTER DELETE ON chunks
    FOR EACH ROW WHEN (NOT OLD.is_parent)
    EXECUTE FUNCTION chunk_lexemes_delete();
