-- 0003: keep vectors inline in the heap tuple (STORAGE PLAIN) instead of TOAST.
-- A 384-d vector is ~1.5 kB; next to the chunk text and tsvector the row passes the 2 kB TOAST
-- threshold, and an out-of-line vector costs a TOAST fetch per row in every exact distance scan and
-- every HNSW re-check. With PLAIN the (compressible) text and tsvector are toasted first instead.
ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE PLAIN;
ALTER TABLE embedding_cache ALTER COLUMN embedding SET STORAGE PLAIN;
