-- 0004: index context built at ingest (issue 14 §2). A chunk's lexical and dense index input carries
-- what a reader needs (speaker, date, the thread's preceding message, a document's section path);
-- the stored passage text stays the message itself. NULL = no context (the chunk is indexed as its text).
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS index_context text;
-- thread neighbours of a message: the preceding / following live messages of the same thread (or channel)
CREATE INDEX IF NOT EXISTS documents_thread_time
    ON documents (workspace, (coalesce(thread_external_id, parent_external_id)), event_time, id)
    WHERE kind = 'message' AND deleted_at IS NULL;
