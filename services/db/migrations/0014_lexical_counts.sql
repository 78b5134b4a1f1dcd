-- 0014: exact, maintained counts for the lexical arm's BM25 (issue 26, "ranking depends on Postgres's table
-- statistics"). BM25's N (the chunks a viewer sees) and each query term's share of the corpus used to come from
-- the planner's statistics (pg_stats.most_common_elems, pg_class.reltuples): until the background auto-ANALYZE
-- re-sampled the tables, a newly seen group looked like ~3 visible chunks instead of ~600, and the same corpus
-- ranked differently before and after it. These two tables hold the same figures exactly:
--
--   chunk_acl_counts  live child chunks per (workspace, principals array); N of a viewer is the sum over the
--                     arrays that overlap its principals (the same `principals && viewer` test as the ACL)
--   lexeme_counts     live child chunks per (workspace, lexeme): a lexeme's document frequency in the workspace
--
-- Kept in step by row triggers on chunk_lexemes (migration 0009), which already mirrors every path that writes or
-- deletes chunks; nothing in the application writes them. An update that changes neither workspace, principals nor
-- tsv (event time, author, kind) skips the trigger. Lexemes are upserted in sorted order so two transactions
-- writing the same chunk set take their row locks in the same order; a deadlock across several chunks is retried
-- like any transient database error (services/kafka/delivery.py).
CREATE TABLE chunk_acl_counts (
    workspace  text NOT NULL,
    principals text[] NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (workspace, principals)
);

CREATE TABLE lexeme_counts (
    workspace text NOT NULL,
    lexeme    text NOT NULL,
    n         bigint NOT NULL,
    PRIMARY KEY (workspace, lexeme)
);

INSERT INTO chunk_acl_counts SELECT workspace, principals, count(*) FROM chunk_lexemes GROUP BY 1, 2;
INSERT INTO lexeme_counts
SELECT workspace, l, count(*) FROM chunk_lexemes, unnest(tsvector_to_array(tsv)) AS l GROUP BY 1, 2;

CREATE FUNCTION chunk_acl_count_add(ws text, acl text[], d integer) RETURNS void LANGUAGE sql
SET search_path FROM CURRENT AS $$
    INSERT INTO chunk_acl_counts VALUES (ws, acl, d)
    ON CONFLICT (workspace, principals) DO UPDATE SET n = chunk_acl_counts.n + EXCLUDED.n
$$;

CREATE FUNCTION lexeme_count_add(ws text, tsv tsvector, d integer) RETURNS void LANGUAGE sql
SET search_path FROM CURRENT AS $$
    INSERT INTO lexeme_counts SELECT ws, l, d FROM unnest(tsvector_to_array(tsv)) AS l ORDER BY l
    ON CONFLICT (workspace, lexeme) DO UPDATE SET n = lexeme_counts.n + EXCLUDED.n
$$;

CREATE FUNCTION chunk_counts_sync() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM chunk_acl_count_add(NEW.workspace, NEW.principals, 1);
        PERFORM lexeme_count_add(NEW.workspace, NEW.tsv, 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM chunk_acl_count_add(OLD.workspace, OLD.principals, -1);
        PERFORM lexeme_count_add(OLD.workspace, OLD.tsv, -1);
    ELSE
        IF OLD.workspace IS DISTINCT FROM NEW.workspace OR OLD.principals IS DISTINCT FROM NEW.principals THEN
            PERFORM chunk_acl_count_add(OLD.workspace, OLD.principals, -1);
            PERFORM chunk_acl_count_add(NEW.workspace, NEW.principals, 1);
        END IF;
        IF OLD.workspace IS DISTINCT FROM NEW.workspace OR OLD.tsv IS DISTINCT FROM NEW.tsv THEN
            PERFORM lexeme_count_add(OLD.workspace, OLD.tsv, -1);
            PERFORM lexeme_count_add(NEW.workspace, NEW.tsv, 1);
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER chunk_counts_insert AFTER INSERT ON chunk_lexemes
    FOR EACH ROW EXECUTE FUNCTION chunk_counts_sync();
CREATE TRIGGER chunk_counts_update AFTER UPDATE OF workspace, principals, tsv ON chunk_lexemes
    FOR EACH ROW
    WHEN (OLD.workspace IS DISTINCT FROM NEW.workspace OR OLD.principals IS DISTINCT FROM NEW.principals
          OR OLD.tsv IS DISTINCT FROM NEW.tsv)
    EXECUTE FUNCTION chunk_counts_sync();
CREATE TRIGGER chunk_counts_delete AFTER DELETE ON chunk_lexemes
    FOR EACH ROW EXECUTE FUNCTION chunk_counts_sync();

-- The access boost's usage, decayed (issue 26: "bounded, decayed"): access_weight is the number of accesses, each
-- halved every ACCESS_HALF_LIFE_DAYS (retriever/access.py) up to accessed_at, when it was last written; readers
-- decay it on to their own now(). access_count stays the plain total. Existing counts start decaying now.
ALTER TABLE chunks ADD COLUMN access_weight double precision NOT NULL DEFAULT 0, ADD COLUMN accessed_at timestamptz;
UPDATE chunks SET access_weight = access_count, accessed_at = now() WHERE access_count > 0;
