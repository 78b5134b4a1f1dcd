-- 0010: (1) the author's name as the connector sent it. A chat connector often sends only
-- `author.display_name` (no email, no platform id): no person can be resolved from it (names never create or
-- merge people), but the name is still what a reader needs — the speaker label of the index context
-- ("[8 May 2023] Caroline: …") and the author a question names. `documents.author_name` keeps it; readers use
-- the resolved person's name first and this one when there is none.
ALTER TABLE documents ADD COLUMN author_name text;

-- (2) the lexical arm reads `chunk_lexemes` (0009), so the GIN index on `chunks.tsv` served only the
-- permission-history text filter (services/governance/access.py), which reaches chunks through `chunks_document`
-- per document anyway. Every child-chunk insert and tsvector rewrite paid for two GIN indexes on the same
-- lexemes; now for one. `chunks.tsv` stays (the trigger copies it; ANALYZE's lexeme statistics of it drive the
-- arm's rare-term choice).
DROP INDEX IF EXISTS chunks_tsv;
