-- 0016: the chunk_lexemes mirror (0009) and its exact counts (0014) kept in step per STATEMENT, not per row
-- (issue 25 §4, ingest speed). The row triggers did the right thing one row at a time: inserting one ingest
-- batch's 1,000 chunk rows ran 500 single-row INSERTs into chunk_lexemes, each firing ~150 single-row lexeme
-- upserts (1 kB messages) — 940 ms of the batch's 1,060 ms chunk insert. The statement triggers below read the
-- statement's transition tables and write the same rows and the same net count deltas in a few set-based
-- statements (one upsert per counts table, keys grouped and sorted, so lock order stays deterministic).
--
-- What fires them is unchanged: every INSERT / DELETE on chunks; an UPDATE on chunks still goes through the row
-- trigger chunk_lexemes_update of 0009 (it fires only for the mirrored columns, so vector and access-count updates
-- stay free); every statement on chunk_lexemes (its only writers are these triggers) updates the counts.

-- chunks -> chunk_lexemes: inserts and deletes per statement
DROP TRIGGER chunk_lexemes_insert ON chunks;
DROP TRIGGER chunk_lexemes_delete ON chunks;

CREATE FUNCTION chunk_lexemes_insert_rows() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO chunk_lexemes
    SELECT id, document_id, workspace, principals, source_system, kind, event_time, author_person_id, tsv,
           length(tsv)
    FROM new_chunks WHERE NOT is_parent AND NOT deleted AND tsv IS NOT NULL
    ORDER BY id
    ON CONFLICT (id) DO UPDATE SET
        document_id = EXCLUDED.document_id, workspace = EXCLUDED.workspace, principals = EXCLUDED.principals,
        source_system = EXCLUDED.source_system, kind = EXCLUDED.kind, event_time = EXCLUDED.event_time,
        author_person_id = EXCLUDED.author_person_id, tsv = EXCLUDED.tsv, dl = EXCLUDED.dl;
    RETURN NULL;
END $$;

CREATE FUNCTION chunk_lexemes_delete_rows() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM chunk_lexemes WHERE id IN (SELECT id FROM old_chunks WHERE NOT is_parent);
    RETURN NULL;
END $$;

CREATE TRIGGER chunk_lexemes_insert AFTER INSERT ON chunks REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_lexemes_insert_rows();
CREATE TRIGGER chunk_lexemes_delete AFTER DELETE ON chunks REFERENCING OLD TABLE AS old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_lexemes_delete_rows();

-- chunk_lexemes -> chunk_acl_counts / lexeme_counts: net deltas per statement
DROP TRIGGER chunk_counts_insert ON chunk_lexemes;
DROP TRIGGER chunk_counts_update ON chunk_lexemes;
DROP TRIGGER chunk_counts_delete ON chunk_lexemes;
DROP FUNCTION chunk_counts_sync();

-- Rows inserted into (d = +1) or deleted from (d = -1) chunk_lexemes; both triggers name their transition table
-- moved_lexemes.
CREATE FUNCTION chunk_counts_moved() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    d integer := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
BEGIN
    INSERT INTO chunk_acl_counts
    SELECT workspace, principals, d * count(*) FROM moved_lexemes GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (workspace, principals) DO UPDATE SET n = chunk_acl_counts.n + EXCLUDED.n;
    INSERT INTO lexeme_counts
    SELECT workspace, l, d * count(*) FROM moved_lexemes, unnest(tsvector_to_array(tsv)) AS l GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (workspace, lexeme) DO UPDATE SET n = lexeme_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$;

-- An update's net delta: its old rows count -1, its new rows +1, over the rows whose counted columns changed
-- (paired by id; a row whose id changed is counted on both sides). Keys whose delta nets to 0 are not written.
CREATE FUNCTION chunk_counts_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO chunk_acl_counts
    SELECT workspace, principals, sum(d) FROM (
        SELECT o.workspace, o.principals, -1 AS d FROM old_lexemes o LEFT JOIN new_lexemes n ON n.id = o.id
        WHERE n.id IS NULL OR (o.workspace, o.principals) IS DISTINCT FROM (n.workspace, n.principals)
        UNION ALL
        SELECT n.workspace, n.principals, 1 FROM new_lexemes n LEFT JOIN old_lexemes o ON o.id = n.id
        WHERE o.id IS NULL OR (o.workspace, o.principals) IS DISTINCT FROM (n.workspace, n.principals)
    ) delta GROUP BY 1, 2 HAVING sum(d) <> 0 ORDER BY 1, 2
    ON CONFLICT (workspace, principals) DO UPDATE SET n = chunk_acl_counts.n + EXCLUDED.n;
    INSERT INTO lexeme_counts
    SELECT workspace, l, sum(d) FROM (
        SELECT o.workspace, o.tsv, -1 AS d FROM old_lexemes o LEFT JOIN new_lexemes n ON n.id = o.id
        WHERE n.id IS NULL OR (o.workspace, o.tsv) IS DISTINCT FROM (n.workspace, n.tsv)
        UNION ALL
        SELECT n.workspace, n.tsv, 1 FROM new_lexemes n LEFT JOIN old_lexemes o ON o.id = n.id
        WHERE o.id IS NULL OR (o.workspace, o.tsv) IS DISTINCT FROM (n.workspace, n.tsv)
    ) delta, unnest(tsvector_to_array(tsv)) AS l GROUP BY 1, 2 HAVING sum(d) <> 0 ORDER BY 1, 2
    ON CONFLICT (workspace, lexeme) DO UPDATE SET n = lexeme_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$;

CREATE TRIGGER chunk_counts_insert AFTER INSERT ON chunk_lexemes REFERENCING NEW TABLE AS moved_lexemes
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_counts_moved();
CREATE TRIGGER chunk_counts_update AFTER UPDATE ON chunk_lexemes
    REFERENCING OLD TABLE AS old_lexemes NEW TABLE AS new_lexemes
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_counts_changed();
CREATE TRIGGER chunk_counts_delete AFTER DELETE ON chunk_lexemes REFERENCING OLD TABLE AS moved_lexemes
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_counts_moved();
